#!/usr/bin/env bash
# Reproduces the client side of the Triton/KServe conformance harness from GitHub sources the
# developer fetched (nothing from PyPI; CI cannot reach GitHub, so this is not part of `make test`).
#
#   TRITON_SRC=/path/src TRITON_CLIENTS=/path/out bridge/conformance/triton/setup.sh [python|pa|all]
#
# TRITON_SRC holds checkouts (or unpacked archives) of:
#   client, common, server          github:triton-inference-server/{client,common,server} (HEAD)
#   kserve                          github:kserve/kserve (only python/kserve is read)
#   perf_analyzer                   github:triton-inference-server/perf_analyzer @ 263c5f6
#   client-pa, common-pa            triton-inference-server/client @ ddce14d6, common @ c09e98a:
#                                   the commits perf_analyzer 263c5f6 builds against
#   libb64                          github:libb64/libb64
# It fills TRITON_CLIENTS with:
#   py/tritonclient     client's src/python/library/tritonclient + gRPC stubs from common/protobuf
#   kserve_py/          kserve's inference client modules + regenerated stubs + kserve_shims/
#   models/simple_string   server's docs/examples/model_repository/simple_string (run.sh serves it)
#   pa-install/bin/perf_analyzer   (the `pa` step, the long one: minutes of C++ on two cores)
# Debian packages: python3-grpcio python3-protobuf python3-numpy python3-geventhttpclient
# python3-aiohttp protobuf-compiler protobuf-compiler-grpc (grpc_python_plugin), and for `pa`:
# cmake g++ libgrpc++-dev libprotobuf-dev libcurl4-openssl-dev rapidjson-dev libb64-dev googletest
# libre2-dev libabsl-dev.
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "${TRITON_SRC:?TRITON_SRC: the directory with the fetched sources}" && pwd)"
OUT="${TRITON_CLIENTS:?TRITON_CLIENTS: the directory to fill}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
STEP="${1:-all}"
JOBS="${JOBS:-2}"

need() { [ -e "$SRC/$1" ] || { echo "setup.sh: $SRC/$1 missing ($2)" >&2; exit 1; }; }

grpc_stubs() { # grpc_stubs OUTDIR PROTODIR PROTO...: Python message and service stubs
	local out="$1" dir="$2"
	shift 2
	protoc -I "$dir" --python_out="$out" --grpc_out="$out" \
		--plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" "$@"
}

tritonclient() {
	need client/src/python/library/tritonclient "github:triton-inference-server/client"
	need common/protobuf/grpc_service.proto "github:triton-inference-server/common"
	rm -rf "$OUT/py" && mkdir -p "$OUT/py"
	cp -r "$SRC/client/src/python/library/tritonclient" "$OUT/py/"
	find "$OUT/py" -name CMakeLists.txt -delete
	local g="$OUT/py/tritonclient/grpc"
	grpc_stubs "$g" "$SRC/common/protobuf" grpc_service.proto model_config.proto
	# as client's build_wheel.py does: grpc_service_pb2* become service_pb2*, package imports
	rm "$g/model_config_pb2_grpc.py" # model_config.proto has no service
	mv "$g/grpc_service_pb2.py" "$g/service_pb2.py"
	mv "$g/grpc_service_pb2_grpc.py" "$g/service_pb2_grpc.py"
	sed -i 's/^import model_config_pb2 as/from tritonclient.grpc import model_config_pb2 as/' "$g/service_pb2.py"
	sed -i 's/^import grpc_service_pb2 as/from tritonclient.grpc import service_pb2 as/' "$g/service_pb2_grpc.py"
	echo "setup.sh: $OUT/py/tritonclient"
}

kserve() {
	local k="$SRC/kserve/python/kserve/kserve"
	need kserve/python/kserve/kserve/inference_client.py "github:kserve/kserve"
	local o="$OUT/kserve_py/kserve"
	rm -rf "$OUT/kserve_py"
	mkdir -p "$o/constants" "$o/protocol/grpc" "$o/protocol/rest" "$o/utils"
	# the client as published
	cp "$k/inference_client.py" "$k/logging.py" "$k/errors.py" "$o/"
	cp "$k/constants/constants.py" "$o/constants/"
	cp "$k/protocol/infer_type.py" "$o/protocol/"
	cp "$k/utils/numpy_codec.py" "$o/utils/"
	cp "$k/protocol/grpc/grpc_predict_v2.proto" "$o/protocol/grpc/"
	for d in constants protocol protocol/grpc protocol/rest utils; do : >"$o/$d/__init__.py"; done
	# errors.py imports fastapi only for the server's exception handlers
	sed -i 's/^from fastapi.responses import JSONResponse$/JSONResponse = None  # shim: fastapi is only used by the server handlers/' "$o/errors.py"
	grpc_stubs "$o/protocol/grpc" "$o/protocol/grpc" grpc_predict_v2.proto
	sed -i 's/^import grpc_predict_v2_pb2 as/from . import grpc_predict_v2_pb2 as/' "$o/protocol/grpc/grpc_predict_v2_pb2_grpc.py"
	# shims for server-side imports (kserve/__init__, utils, pydantic-2 models) and orjson
	cp -r "$HERE/kserve_shims/." "$OUT/kserve_py/"
	echo "setup.sh: $OUT/kserve_py"
}

pa_sources() { # copies of the trees perf_analyzer builds, made to build with Debian's cmake 3.25
	local t
	for t in client-pa common-pa perf_analyzer libb64; do
		need "$t" "see the header of setup.sh"
		rm -rf "$OUT/src/$t" && mkdir -p "$OUT/src" && cp -r "$SRC/$t" "$OUT/src/$t"
	done
	find "$OUT/src" -name CMakeLists.txt -exec \
		sed -i -E 's/cmake_minimum_required *\( *VERSION [0-9.]+ *\)/cmake_minimum_required(VERSION 3.25)/' {} +
	# common's unit tests want a built gtest; perf_analyzer does not need them
	sed -i -E 's/^( *)add_subdirectory\(test\)/\1# add_subdirectory(test)  # local build: no gtest/' \
		"$OUT/src/common-pa/src/CMakeLists.txt"
}

perf_analyzer() {
	pa_sources
	local s="$OUT/src" p="$OUT/pa-install" shim="$HERE/cmake-shim"
	mkdir -p "$OUT/build/cc" "$OUT/build/pa"
	(cd "$OUT/build/cc" && cmake "$s/client-pa/src/c++" -DTRITON_ENABLE_CC_HTTP=ON -DTRITON_ENABLE_CC_GRPC=ON \
		-DTRITON_ENABLE_GPU=OFF -DTRITON_USE_THIRD_PARTY=OFF -DTRITON_COMMON_ENABLE_PROTOBUF_PYTHON=OFF \
		-DFETCHCONTENT_SOURCE_DIR_REPO-COMMON="$s/common-pa" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
		-DProtobuf_DIR="$shim" -DCMAKE_INSTALL_PREFIX="$p" && make -j"$JOBS" install)
	(cd "$OUT/build/pa" && cmake "$s/perf_analyzer/src" -DTRITON_ENABLE_GPU=OFF \
		-DTRITON_ENABLE_PERF_ANALYZER_OPENAI=OFF -DTRITON_ENABLE_PERF_ANALYZER_DGRPC=OFF \
		-DTRITON_MIN_CXX_STANDARD=20 -DCMAKE_INSTALL_PREFIX="$p" -DCMAKE_INSTALL_LIBDIR=lib \
		-DFETCHCONTENT_SOURCE_DIR_REPO-COMMON="$s/common-pa" \
		-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=/usr/src/googletest \
		-DFETCHCONTENT_SOURCE_DIR_LIBB64="$s/libb64" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
		-DProtobuf_DIR="$shim" && make -j"$JOBS" perf_analyzer)
	mkdir -p "$p/bin"
	cp "$OUT/build/pa/perf_analyzer" "$p/bin/"
	echo "setup.sh: $p/bin/perf_analyzer"
}

models() { # the example models this repo has no copy of (infer/modelconfig/testdata has the rest)
	local m=server/docs/examples/model_repository/simple_string
	need "$m" "github:triton-inference-server/server"
	rm -rf "$OUT/models" && mkdir -p "$OUT/models" && cp -r "$SRC/$m" "$OUT/models/"
	echo "setup.sh: $OUT/models/simple_string"
}

case "$STEP" in
python) tritonclient && kserve && models ;;
pa) perf_analyzer ;;
all) tritonclient && kserve && models && perf_analyzer ;;
*) echo "setup.sh: unknown step $STEP (python, pa or all)" >&2 && exit 2 ;;
esac
