# Sourced on the device machine by run_speed.sh, run_zoo.sh, run_gpu.sh and run_decode.sh, staged beside
# them (OUT/ of the prepare_*.py scripts):  C=<their folder> D=<unpack dir> B=<bundle file> . "$C/device_env.sh"
# Unpacks $C/$B into $D (REUSE=1 keeps an earlier unpack there; a libvulkan_delegate_runtime.so beside the
# calling script replaces the bundle's), then sets up the Debian Vulkan loader
# (debs/ of staging.py), NVIDIA's driver files and the bundle's libraries on the loader path.
# O = $OUT (or /tmp); env.txt there gets the date, GPU, driver, memory clock and Python.
if [ "${REUSE:-0}" != 1 ] || [ ! -f "$D/.unpacked" ]; then
  rm -rf "$D" && mkdir -p "$D"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$C/$B" "$D" || exit 1
  touch "$D/.unpacked"
fi
# a runtime library beside the calling script (rebuilt after staging; no .pte depends on it) wins
[ -f "$C/libvulkan_delegate_runtime.so" ] && cp "$C/libvulkan_delegate_runtime.so" "$D/"
for f in "$D"/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
O=${OUT:-/tmp}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader; python3 -V; } \
  | tee -a "$O/env.txt"
