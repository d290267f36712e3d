# ctest `install.version`: README's install step works. `cmake --install` of this build into a fresh prefix under
# the build folder, then the installed halfmap prints its version and git commit.
#   cmake -DBUILD_DIR=<build> -DPREFIX=<folder> -P install_check.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}):\n${out}${err}")
endif()
foreach(f bin/halfmap share/doc/halfmap/README.md share/doc/halfmap/LICENSE share/doc/halfmap/docs/numerics.md)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
execute_process(COMMAND "${PREFIX}/bin/halfmap" --version RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^halfmap [0-9]+\\.[0-9]+\\.[0-9]+ \\(git [0-9a-z]+, ")
  message(FATAL_ERROR "the installed halfmap --version (exit ${rc}) printed:\n${out}${err}")
endif()
message(STATUS "installed: ${out}")
