# sparsgd_add_layer(NAME SOURCES ... [LAYERS lower layers...] [LINKS ...] [PRIVATE_LINKS ...]):
# the library target sparsgd_NAME (sparsgd::NAME) of one layer. Its headers are include/sparsgd/NAME
# and its private ones src/NAME; each layer gets an include root in the build tree that holds links
# to those two folders only, and a target's include path is its own root and the roots of the
# LAYERS it links. So a source that includes a header of a layer it does not link (one above it)
# fails to compile: "sparsgd/torch/x.hpp: No such file or directory". Installed, every header is in
# one include/ folder, as users expect.

# sparsgd_layer_roots(NAME): the include roots of layer NAME, made once:
# ${PROJECT_BINARY_DIR}/layers/NAME/include/sparsgd/NAME -> include/sparsgd/NAME and
# ${PROJECT_BINARY_DIR}/layers/NAME/src/NAME -> src/NAME.
function(sparsgd_layer_roots name)
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${root}/include/sparsgd ${root}/src)
  if(EXISTS ${PROJECT_SOURCE_DIR}/include/sparsgd/${name} AND NOT EXISTS ${root}/include/sparsgd/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/sparsgd/${name} ${root}/include/sparsgd/${name} SYMBOLIC)
  endif()
  if(EXISTS ${PROJECT_SOURCE_DIR}/src/${name} AND NOT EXISTS ${root}/src/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/src/${name} SYMBOLIC)
  endif()
endfunction()

# sparsgd_layer_include(TARGET NAME LAYERS...): TARGET sees layer NAME's headers (public, and its
# private ones privately) and the public and private headers of LAYERS (the layers below it).
function(sparsgd_layer_include target name)
  sparsgd_layer_roots(${name})
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${root}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${root}/src)
  foreach(lower ${ARGN})
    sparsgd_layer_roots(${lower})
    target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/layers/${lower}/src)
  endforeach()
endfunction()

function(sparsgd_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;LAYERS;LINKS;PRIVATE_LINKS" ${ARGN})
  add_library(sparsgd_${name} ${L_SOURCES})
  add_library(sparsgd::${name} ALIAS sparsgd_${name})
  set_target_properties(sparsgd_${name} PROPERTIES EXPORT_NAME ${name})
  sparsgd_layer_include(sparsgd_${name} ${name} ${L_LAYERS})
  set(layer_targets)
  foreach(lower ${L_LAYERS})
    list(APPEND layer_targets sparsgd_${lower})
  endforeach()
  target_link_libraries(sparsgd_${name} PUBLIC ${layer_targets} ${L_LINKS}
    PRIVATE ${L_PRIVATE_LINKS} $<BUILD_INTERFACE:sparsgd_warnings>)
  install(TARGETS sparsgd_${name} EXPORT sparsgdTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
