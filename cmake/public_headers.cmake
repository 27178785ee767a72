# The headers `cmake --install` installs (docs/library.md, "Headers"): the entry points a program
# that embeds or extends crest uses, and every crest header they include, found by reading their
# #include lines at configure time. A header that none of them reaches (the CLI's, the data
# formats', the spatial split's, the records') is crest's own and stays in the tree.
set(CREST_PUBLIC_ENTRY_HEADERS
    # run configs, the trainer and its records' hooks
    crest/train/config.hpp crest/train/trainer.hpp crest/train/task.hpp
    crest/train/run_observer.hpp crest/train/metric.hpp crest/train/dataset_registry.hpp
    # compiling and running a network, weights
    crest/engine/session.hpp crest/engine/training_session.hpp crest/engine/weights.hpp
    crest/engine/trained_weights.hpp crest/core/error.hpp crest/core/host_staging.hpp
    crest/dist/communicator.hpp
    # the registries and what their entries are made of
    crest/optim/optimizer_registry.hpp crest/optim/lr_schedule_registry.hpp
    crest/models/model_registry.hpp crest/models/cosmoflow.hpp crest/models/deepcam.hpp
    crest/models/tiramisu.hpp
    crest/graph/layer_registry.hpp crest/graph/graph_yaml.hpp crest/data/sample_source.hpp
    crest/data/data_family.hpp
    # the layers' builder functions, for graphs built in C++
    crest/layers/activation.hpp crest/layers/batch_norm.hpp crest/layers/channel_affine.hpp
    crest/layers/conv.hpp crest/layers/dense.hpp crest/layers/elementwise.hpp crest/layers/loss.hpp
    crest/layers/pool.hpp crest/layers/shape_ops.hpp)

# Sets `out` to the entry headers and everything they include (paths under include/, sorted).
function(crest_public_headers out)
  set(todo ${CREST_PUBLIC_ENTRY_HEADERS})
  set(found)
  while(todo)
    list(POP_FRONT todo header)
    if(header IN_LIST found)
      continue()
    endif()
    set(path ${PROJECT_SOURCE_DIR}/include/${header})
    if(NOT EXISTS ${path})
      message(FATAL_ERROR "public header ${header} (cmake/public_headers.cmake) does not exist")
    endif()
    list(APPEND found ${header})
    # A change to a header's includes changes the set: configure again when one changes.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
    file(STRINGS ${path} includes REGEX "^#include [\"<]crest/")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include [\"<](crest/[^\">]+)[\">].*" "\\1" included "${line}")
      list(APPEND todo ${included})
    endforeach()
  endwhile()
  list(SORT found)
  set(${out} ${found} PARENT_SCOPE)
endfunction()
