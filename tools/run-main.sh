#!/usr/bin/env bash
# The main job: dependencies, a Release build, then the headline example: Fashion-MNIST
# training under fp16 autocast (or, until that example exists, a smaller one).
#   bash tools/run-main.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${BUILD_DIR:-build}
# The first example present, in order of preference; its target is named after its folder.
for example in mnist custom_op autograd_demo; do
  [[ -f examples/$example/CMakeLists.txt ]] && break
done

bash tools/install-deps.sh
bash tools/build.sh --target "$example"

case $example in
  mnist) exec "$build_dir/examples/mnist/mnist" --amp fp16 ;;
  *) exec "$build_dir/examples/$example/$example" ;;
esac
