# The CUDA backend's toolchain (src/backends/cuda, docs/cuda.md): nvcc, the CUDA runtime, cuBLAS
# and cuDNN 9. CREST_WITH_CUDA (cmake/features.cmake): AUTO (the default) builds the backend when
# all of them are found and says what is missing when not; ON makes a missing piece a configure
# error; OFF skips it.
# Without CUDA (a fresh Debian machine) crest builds and tests exactly as before. The toolkit is
# looked for in /usr/local/cuda unless CUDAToolkit_ROOT or CMAKE_CUDA_COMPILER points elsewhere.
crest_feature(CREST_WITH_CUDA "Build the CUDA backend (src/backends/cuda)")
set(CREST_CUDA_FOUND OFF)

function(crest_cuda_missing what)
  crest_feature_missing(CREST_WITH_CUDA STATUS "${what} (docs/cuda.md)"
                        "the CUDA backend is not built")
endfunction()

if(CREST_WITH_CUDA_WANTED)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    crest_cuda_missing("no CUDA compiler (nvcc) was found")
  else()
    # Hopper (H100/H200) machine code plus its PTX, which newer GPUs compile at load; set
    # CMAKE_CUDA_ARCHITECTURES for others (80 for A100, 70 for V100).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    enable_language(CUDA)
    # nvcc compiles host code with the C++ compiler, whose own include directories (/usr/include)
    # must not come back as -isystem flags: they break libstdc++'s #include_next.
    list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})
    find_package(CUDAToolkit QUIET)
    find_path(CREST_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(CREST_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cublasLt)
      crest_cuda_missing("the CUDA toolkit (runtime, cuBLAS and cuBLASLt) was not found")
    elseif(NOT CREST_CUDNN_INCLUDE OR NOT CREST_CUDNN_LIBRARY)
      crest_cuda_missing("cuDNN (cudnn.h, libcudnn) was not found")
    else()
      set(CREST_CUDA_FOUND ON)
      # C++20 as for the C++ code. CMake 3.25 (Debian 12) does not know nvcc 13's dialect flags.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
      set(CMAKE_CUDA_STANDARD 20)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      set(CMAKE_CUDA_EXTENSIONS OFF)
      add_library(crest_cuda_deps INTERFACE)
      target_include_directories(crest_cuda_deps SYSTEM INTERFACE ${CREST_CUDNN_INCLUDE})
      target_link_libraries(crest_cuda_deps INTERFACE CUDA::cudart CUDA::cublas CUDA::cublasLt
                            ${CREST_CUDNN_LIBRARY})
      message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                     "${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CREST_CUDNN_LIBRARY}")
    endif()
  endif()
endif()

# libcrest_cuda.so: every source of src/backends/cuda but its loader, linked with the CUDA
# libraries and loaded by the loader (src/backends/cuda/loader/plugin_loader.cpp) when a run asks
# for the backend. It resolves crest's own symbols in the binary or libcrest.so that loads it (so
# no --no-undefined here); it lives beside the binaries in the build tree and in lib/ installed.
function(crest_cuda_plugin)
  include(GNUInstallDirs)
  file(GLOB cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cpp
       ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cu)
  add_library(crest_cuda MODULE ${cuda_sources})
  target_include_directories(crest_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src/backends
                             ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(crest_cuda PRIVATE
                         "$<$<COMPILE_LANGUAGE:CXX>:${CREST_WARNINGS};${CREST_FLOAT_FLAGS}>"
                         "$<$<COMPILE_LANGUAGE:CUDA>:${CREST_CUDA_FLAGS}>")
  target_link_libraries(crest_cuda PRIVATE crest_cuda_deps)
  # cuDNN may sit apart from the toolkit (a Spack prefix of its own): both in the run path.
  get_filename_component(cudnn_dir "${CREST_CUDNN_LIBRARY}" DIRECTORY)
  set_target_properties(crest_cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin
                        INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR};${cudnn_dir}")
  install(TARGETS crest_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # Built with every binary that may load it.
  add_dependencies(crest_backends crest_cuda)
endfunction()
