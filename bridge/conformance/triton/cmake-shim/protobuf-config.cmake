# Debian's libprotobuf-dev ships no CMake package config; serve the module's results as one.
if(NOT TARGET protobuf::libprotobuf)
  find_package(Protobuf MODULE REQUIRED)
endif()
set(Protobuf_FOUND TRUE)
