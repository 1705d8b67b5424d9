// One TOSA 1.0 flatbuffer, parsed and initialized once on the TOSA reference model, run many times.
//
// Shared by the TOSA backend (the payload is the flatbuffer) and the Ethos-U backend (the
// flatbuffer is the bin stream's "tosa_graph" block). The reference model's headers stay in the .cpp
// so backends compile against ExecuTorch only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/tensor_io.h"

namespace runtime_cpp {

class TosaRunner {
 public:
  ~TosaRunner();
  TosaRunner(const TosaRunner&) = delete;
  TosaRunner& operator=(const TosaRunner&) = delete;

  // Parses (flatbuffer verifier first) and initializes the graph. `backend` prefixes log lines.
  // Error::InvalidProgram with a log line for anything the parser or the reference model rejects.
  static Error create(const char* backend, const uint8_t* data, size_t size,
                      std::unique_ptr<TosaRunner>* out);

  size_t num_inputs() const;
  size_t num_outputs() const;

  // `args` as ExecuTorch passes them to a delegate: the inputs, then the outputs (pre-allocated).
  // Checks count, dtype and element count of each against the graph before running.
  // Not re-entrant: callers serialize runs of one runner (each delegate handle owns one).
  Error run(const char* backend, Span<EValue*> args);

 private:
  struct Impl;
  explicit TosaRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace runtime_cpp
