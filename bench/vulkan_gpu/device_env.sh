# Sourced on the device machine by run_speed.sh, run_zoo.sh and run_decode.sh after they unpack their bundle
# into $D (staging.py put debs/ there): the Debian Vulkan loader, NVIDIA's driver files, the bundle's
# libraries on the loader path; O = $OUT (or /tmp); env.txt gets the date, GPU, driver and Python.
for f in "$D"/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
O=${OUT:-/tmp}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader; python3 -V; } \
  | tee -a "$O/env.txt"
