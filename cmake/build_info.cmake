# Writes OUTPUT (a C++ source) from TEMPLATE with the library's version and the source revision it
# was built from. Run at every build (not only at configure time), so that an incremental build
# never reports the commit of an older one; configure_file rewrites OUTPUT only when its text
# changes, so an unchanged revision recompiles nothing.
# Inputs: -DSOURCE_DIR= -DTEMPLATE= -DOUTPUT= -DVERSION=
set(SPARSGD_REVISION unknown)  # not a git checkout (a release tarball), or no git on the machine
find_program(GIT_EXECUTABLE git)
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed ERROR_QUIET)
  if(NOT failed AND commit MATCHES "^[0-9a-f]+$")
    set(SPARSGD_REVISION ${commit})
    # Tracked files changed since that commit: the build is not exactly the commit it names.
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE failed ERROR_QUIET)
    if(failed)
      set(SPARSGD_REVISION "${SPARSGD_REVISION}-unchecked")
    elseif(NOT changes STREQUAL "")
      set(SPARSGD_REVISION "${SPARSGD_REVISION}-dirty")
    endif()
  endif()
endif()
set(SPARSGD_VERSION ${VERSION})
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
