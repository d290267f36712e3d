# The peer libraries (oneDNN, XNNPACK, Eigen, OpenBLAS; PyTorch for the sweep only), each optional: found here
# once, for both binaries that use their adapters (src/peers/<lib>.cpp): the `halfmap` CLI, whose sweep maps them,
# and halfmap_bench, which times them. A library that is found gets an INTERFACE target halfmap_peer_<lib> (include
# dirs, link libraries, HALFMAP_PEER_<LIB>=1 and its version definitions; and HALFMAP_PEER_SOURCES_<lib>, sources
# beside src/peers/<lib>.cpp); a missing one gets HALFMAP_PEER_MISSING_<lib>, the reason in words, which the build,
# meta.json and halfmap_bench's context report. In the arm64 cross build (cmake/aarch64-linux-gnu.cmake) only arm64
# copies are found, so the binary libraries are missing there unless their :arm64 packages are installed; Eigen,
# header-only, is found on both.
set(HALFMAP_PEER_LIBS openblas onednn xnnpack eigen torch)
# The libraries halfmap_bench times: PyTorch runs in Python servers, which the sweep maps but no benchmark times.
set(HALFMAP_PEER_TIMED_LIBS openblas onednn xnnpack eigen)

# Writes FILE, the peer list of one binary (src/peers/peers.hpp, Listed, says how it is read): for each library of
# LIBS, HALFMAP_PEER(<lib>) where it is built, HALFMAP_PEER_FOR(<lib>, <isa>) where it is built with the flags of
# halfmap's <isa> folder (FOR: <lib> <isa> pairs), else HALFMAP_PEER_MISSING("<lib>", "<reason>."), the reason
# OFF if given, else HALFMAP_PEER_MISSING_<lib>.
function(halfmap_peer_list file)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OFF" "LIBS;FOR")
  set(text "")
  foreach(lib IN LISTS arg_LIBS)
    list(FIND arg_FOR ${lib} at)
    if(arg_OFF)
      string(APPEND text "HALFMAP_PEER_MISSING(\"${lib}\", \"${arg_OFF}\")\n")
    elseif(TARGET halfmap_peer_${lib} AND at GREATER -1)
      math(EXPR at "${at} + 1")
      list(GET arg_FOR ${at} isa)
      string(APPEND text "HALFMAP_PEER_FOR(${lib}, ${isa})\n")
    elseif(TARGET halfmap_peer_${lib})
      string(APPEND text "HALFMAP_PEER(${lib})\n")
    else()
      string(APPEND text "HALFMAP_PEER_MISSING(\"${lib}\", \"${HALFMAP_PEER_MISSING_${lib}}.\")\n")
    endif()
  endforeach()
  file(CONFIGURE OUTPUT ${file} CONTENT "${text}")
endfunction()

function(halfmap_peer_missing name packages)
  set(HALFMAP_PEER_MISSING_${name} "not found at build time (install ${packages})" PARENT_SCOPE)
  message(STATUS "peer ${name} not found (install ${packages}): its benchmarks and sweep paths are not built")
endfunction()

# The Debian package version of a peer, for the context where the library has no version call of its own.
function(halfmap_peer_package_version package out)
  execute_process(COMMAND dpkg-query -W -f=\${Version} ${package} OUTPUT_VARIABLE v ERROR_QUIET
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR v STREQUAL "")
    set(v "unknown (no ${package} package)")
  endif()
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

# OpenBLAS, through pkg-config: Debian keeps cblas.h in a per-variant folder (openblas-pthread) that the .pc file
# names, so the header always matches the library that is linked.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HALFMAP_OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()
if(HALFMAP_OPENBLAS_FOUND)
  # cblas_sbgemm is declared in every 0.3.21 cblas.h but exported only by builds with BUILD_BFLOAT16: a link test.
  include(CheckCXXSymbolExists)
  set(CMAKE_REQUIRED_LIBRARIES PkgConfig::HALFMAP_OPENBLAS)
  check_cxx_symbol_exists(cblas_sbgemm cblas.h HALFMAP_OPENBLAS_HAS_SBGEMM)
  unset(CMAKE_REQUIRED_LIBRARIES)
  if(HALFMAP_OPENBLAS_HAS_SBGEMM)
    set(sbgemm 1)
  else()
    set(sbgemm 0)
  endif()
  add_library(halfmap_peer_openblas INTERFACE)
  target_link_libraries(halfmap_peer_openblas INTERFACE PkgConfig::HALFMAP_OPENBLAS)
  target_compile_definitions(halfmap_peer_openblas INTERFACE HALFMAP_PEER_OPENBLAS=1
                             HALFMAP_PEER_OPENBLAS_SBGEMM=${sbgemm}
                             HALFMAP_PEER_OPENBLAS_VERSION="${HALFMAP_OPENBLAS_VERSION}")
  set(HALFMAP_PEER_VERSION_openblas "${HALFMAP_OPENBLAS_VERSION}")
else()
  halfmap_peer_missing(openblas libopenblas-dev)
endif()

# oneDNN: header and library directly. Debian's dnnl-config.cmake also requires the OpenCL headers (the package's
# GPU runtime), which the CPU matmul does not need. Its CPU runtime is OpenMP: the peers call omp_set_num_threads,
# so they link libgomp (not -fopenmp: nothing of halfmap's own is parallel).
find_path(HALFMAP_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(HALFMAP_DNNL_LIBRARY dnnl)
find_package(OpenMP QUIET COMPONENTS CXX)
if(HALFMAP_DNNL_INCLUDE_DIR AND HALFMAP_DNNL_LIBRARY AND OpenMP_CXX_FOUND)
  add_library(halfmap_peer_onednn INTERFACE)
  target_include_directories(halfmap_peer_onednn INTERFACE ${HALFMAP_DNNL_INCLUDE_DIR})
  target_link_libraries(halfmap_peer_onednn INTERFACE ${HALFMAP_DNNL_LIBRARY} ${OpenMP_CXX_LIBRARIES})
  target_compile_definitions(halfmap_peer_onednn INTERFACE HALFMAP_PEER_ONEDNN=1)
  # beside src/peers/onednn.cpp, one file per primitive (src/peers/onednn.hpp lists them)
  set(HALFMAP_PEER_SOURCES_onednn src/peers/onednn_matmul.cpp src/peers/onednn_softmax.cpp src/peers/onednn_norm.cpp
                                  src/peers/onednn_reduce.cpp src/peers/onednn_attention.cpp)
  set(HALFMAP_PEER_VERSION_onednn "")
else()
  halfmap_peer_missing(onednn libdnnl-dev)
endif()

# XNNPACK and pthreadpool (whose header xnnpack.h includes) have no CMake or pkg-config files in Debian 12.
# libXNNPACK.so carries its own dependencies (cpuinfo, pthreadpool). It has no version call: the package's
# version is used.
find_path(HALFMAP_XNNPACK_INCLUDE_DIR xnnpack.h)
find_path(HALFMAP_PTHREADPOOL_INCLUDE_DIR pthreadpool.h)
find_library(HALFMAP_XNNPACK_LIBRARY XNNPACK)
find_library(HALFMAP_PTHREADPOOL_LIBRARY pthreadpool)
if(HALFMAP_XNNPACK_INCLUDE_DIR AND HALFMAP_PTHREADPOOL_INCLUDE_DIR AND HALFMAP_XNNPACK_LIBRARY
   AND HALFMAP_PTHREADPOOL_LIBRARY)
  halfmap_peer_package_version(libxnnpack-dev xnnpack_version)
  add_library(halfmap_peer_xnnpack INTERFACE)
  target_include_directories(halfmap_peer_xnnpack INTERFACE ${HALFMAP_XNNPACK_INCLUDE_DIR}
                             ${HALFMAP_PTHREADPOOL_INCLUDE_DIR})
  target_link_libraries(halfmap_peer_xnnpack INTERFACE ${HALFMAP_XNNPACK_LIBRARY} ${HALFMAP_PTHREADPOOL_LIBRARY})
  target_compile_definitions(halfmap_peer_xnnpack INTERFACE HALFMAP_PEER_XNNPACK=1
                             HALFMAP_PEER_XNNPACK_VERSION="${xnnpack_version}")
  set(HALFMAP_PEER_VERSION_xnnpack "${xnnpack_version}")
else()
  halfmap_peer_missing(xnnpack "libxnnpack-dev libpthreadpool-dev")
endif()

find_package(Eigen3 3.4 QUIET NO_MODULE)
if(Eigen3_FOUND)
  add_library(halfmap_peer_eigen INTERFACE)
  target_link_libraries(halfmap_peer_eigen INTERFACE Eigen3::Eigen)
  target_compile_definitions(halfmap_peer_eigen INTERFACE HALFMAP_PEER_EIGEN=1)
  set(HALFMAP_PEER_VERSION_eigen "${Eigen3_VERSION}")
else()
  halfmap_peer_missing(eigen libeigen3-dev)
endif()

# PyTorch: nothing to link. Its kernels run in Python, in servers of tools/torch_peer.py that src/peers/torch.cpp
# starts and talks to over a socket (torch_server.cpp). Found when Debian's python3 (the one tools/main.sh runs,
# first; else python3 in PATH) imports torch at configure time (a few seconds; a found version is cached). Not in
# a cross build: the build machine's Python says nothing about the target's.
if(NOT CMAKE_CROSSCOMPILING)
  find_program(HALFMAP_TORCH_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  find_program(HALFMAP_TORCH_PYTHON NAMES python3)
endif()
if(HALFMAP_TORCH_PYTHON AND NOT HALFMAP_TORCH_VERSION)
  execute_process(COMMAND ${HALFMAP_TORCH_PYTHON} -c "import torch, numpy; print(torch.__version__, end='')"
                  OUTPUT_VARIABLE torch_version ERROR_QUIET RESULT_VARIABLE rc TIMEOUT 120)
  if(rc EQUAL 0 AND NOT torch_version STREQUAL "")
    set(HALFMAP_TORCH_VERSION "${torch_version}" CACHE STRING "torch.__version__ of HALFMAP_TORCH_PYTHON (found)")
  endif()
endif()
if(HALFMAP_TORCH_VERSION AND NOT CMAKE_CROSSCOMPILING)
  halfmap_peer_package_version(python3-torch torch_package)
  add_library(halfmap_peer_torch INTERFACE)
  set(HALFMAP_PEER_SOURCES_torch src/peers/torch_server.cpp)  # beside src/peers/torch.cpp
  target_link_libraries(halfmap_peer_torch INTERFACE nlohmann_json::nlohmann_json)
  target_compile_definitions(halfmap_peer_torch INTERFACE HALFMAP_PEER_TORCH=1
                             HALFMAP_PEER_TORCH_PYTHON="${HALFMAP_TORCH_PYTHON}"
                             HALFMAP_PEER_TORCH_SCRIPT="${CMAKE_CURRENT_LIST_DIR}/../tools/torch_peer.py"
                             HALFMAP_PEER_TORCH_VERSION="${torch_package}")
  set(HALFMAP_PEER_VERSION_torch "${HALFMAP_TORCH_VERSION}")
elseif(CMAKE_CROSSCOMPILING)
  set(HALFMAP_PEER_MISSING_torch "not built in a cross build (its Python runs on the build machine)")
else()
  halfmap_peer_missing(torch python3-torch)
endif()
