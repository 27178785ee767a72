# A build feature that needs a library (oneDNN, ONNX, CUDA): a cache string AUTO, ON or OFF.
# AUTO (the default) builds the feature when the library is found and says what is missing when
# it is not, so a plain `make run` works on any machine. ON makes a missing library a configure
# error: what a package manager asks for (Spack's +onednn must never build a crest without
# oneDNN, packaging/spack). OFF skips the feature and does not look for the library.
#
# crest_feature(NAME "doc") sets NAME_WANTED (AUTO or ON) and NAME_REQUIRED (ON) in the caller.
macro(crest_feature name doc)
  set(${name} AUTO CACHE STRING "${doc}: AUTO, ON or OFF")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" _crest_feature_value)
  if(_crest_feature_value STREQUAL "AUTO")
    set(${name}_WANTED ON)
    set(${name}_REQUIRED OFF)
  elseif(${name})  # ON, YES, TRUE, 1: CMake's true constants, as an option() took them
    set(${name}_WANTED ON)
    set(${name}_REQUIRED ON)
  else()
    set(${name}_WANTED OFF)
    set(${name}_REQUIRED OFF)
  endif()
endmacro()

# Says that feature NAME is not built because MISSING (what was not found, and how to get it):
# a configure error when the feature was required; else a message of MODE (STATUS, or WARNING
# where the build is much poorer without it) that adds what the build lacks (the last argument).
# No semicolons in either: CMake would take them for list separators.
function(crest_feature_missing name mode missing lacking)
  if(${name}_REQUIRED)
    message(FATAL_ERROR "${name}=${${name}} but ${missing}")
  endif()
  message(${mode} "${missing}: ${lacking}")
endfunction()
