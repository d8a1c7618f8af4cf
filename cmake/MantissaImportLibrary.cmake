# mantissa_import_library(<Package> <Target> HEADER <file> LIBRARY <name> [HINTS <dir>...])
# The body of Mantissa's small find modules (FindMantissaCuDNN/NCCL/OneDNN.cmake): finds the
# header and the library, sets <Package>_FOUND, <Package>_INCLUDE_DIR, <Package>_LIBRARY, and
# defines the imported target <Target>. The modules are installed with the package, so a
# consumer looks each library up on its own machine and the exported targets name no path
# of the build machine.
include(FindPackageHandleStandardArgs)
function(mantissa_import_library package target)
  cmake_parse_arguments(arg "" "HEADER;LIBRARY" "HINTS" ${ARGN})
  find_path(${package}_INCLUDE_DIR ${arg_HEADER} HINTS ${arg_HINTS} PATH_SUFFIXES include)
  find_library(${package}_LIBRARY ${arg_LIBRARY} HINTS ${arg_HINTS} PATH_SUFFIXES lib64 lib)
  find_package_handle_standard_args(${package} REQUIRED_VARS ${package}_LIBRARY ${package}_INCLUDE_DIR)
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${package}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${package}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${package}_INCLUDE_DIR ${package}_LIBRARY)
  set(${package}_FOUND ${${package}_FOUND} PARENT_SCOPE)
endfunction()
