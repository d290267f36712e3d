# Cross toolchain: an x86-64 Debian 12 host builds for arm64 (aarch64-linux-gnu) with Debian's cross compiler
# and the arm64 multiarch packages (libgtest-dev:arm64, libbenchmark-dev:arm64, libfmt-dev:arm64, ...) that
# tools/setup.sh installs. Used by the `arm64` preset; tests run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR,
# set by the preset).
#
# Debian multiarch needs no sysroot: arm64 libraries and their CMake configs live in /usr/lib/aarch64-linux-gnu,
# arch-independent headers and header-only configs (CLI11, nlohmann_json, xsimd's headers) in /usr/include and
# /usr/share/cmake, shared by both architectures. What must never be picked up is the x86-64 twin of a library
# (/usr/lib/x86_64-linux-gnu): the library architecture below points every find_* at the arm64 directories, and
# the x86-64 ones are ignored outright so that a lookup that misses on arm64 fails instead of finding x86-64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# find_package / find_library / find_path search <prefix>/lib/<arch> and <prefix>/include/<arch> with this.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# CMAKE_IGNORE_PATH is not recursive: list the package directories too (find_package checks the directory that
# holds the config file).
set(_halfmap_x86_dirs /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu)
file(GLOB _halfmap_x86_cmake_dirs LIST_DIRECTORIES true /usr/lib/x86_64-linux-gnu/cmake /usr/lib/x86_64-linux-gnu/cmake/*)
list(APPEND CMAKE_IGNORE_PATH ${_halfmap_x86_dirs} ${_halfmap_x86_cmake_dirs})
unset(_halfmap_x86_dirs)
unset(_halfmap_x86_cmake_dirs)

# Programs (git, qemu) are host programs; everything else is searched for the target only as described above.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config, should anything use it, must read arm64 .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
