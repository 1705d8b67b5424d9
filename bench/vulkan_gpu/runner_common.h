// Helpers shared by the bench's runners (runner.cpp, decode_runner.cpp): input files, the CPU kernel
// libraries of the wheel, and the Vulkan backend library.
#pragma once
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

// Whole file as float32 values; empty when it cannot be read or its size is not a multiple of 4.
inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::streamsize bytes = f.tellg();
  if (bytes <= 0 || bytes % 4) return {};
  std::vector<float> v(static_cast<size_t>(bytes) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), bytes);
  return f ? v : std::vector<float>{};
}

// Folder of this executable (the bundle keeps libexecutorch*.so beside it).
inline std::string own_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// dlopen (global, so their inline registrations reach libexecutorch.so's kernel table) every
// libexecutorch_kernels_*.so in `dir`; returns how many loaded.
inline int load_cpu_kernels(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  int loaded = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("libexecutorch_kernels_", 0) != 0 || name.find(".so") == std::string::npos) continue;
    if (dlopen((dir + "/" + name).c_str(), RTLD_NOW | RTLD_GLOBAL)) ++loaded;
    else std::fprintf(stderr, "cannot load CPU kernels %s: %s\n", name.c_str(), dlerror());
  }
  closedir(d);
  return loaded;
}

// dlopen the backend library `lib` (global) and register it; false (with the reason on stderr) on failure.
inline bool load_backend(const std::string& lib) {
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
  // ours registers through this function; a library without it (ET-VK's libetvk.so, bench/vulkan_gpu/
  // build_etvk.sh) registered its backend by a static initializer when it was loaded
  auto reg = handle ? reinterpret_cast<int (*)()>(dlsym(handle, "runtime_cpp_register_vulkan_delegate")) : nullptr;
  if (!handle || (reg && reg() != 0)) {
    std::fprintf(stderr, "cannot load/register %s: %s\n", lib.c_str(), handle ? "registration failed" : dlerror());
    return false;
  }
  return true;
}
