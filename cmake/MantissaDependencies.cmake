# Third-party packages, all from Debian 12 (tools/install-deps.sh installs them).
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)  # header-only; safetensors headers (kept private)
include(GNUInstallDirs)
