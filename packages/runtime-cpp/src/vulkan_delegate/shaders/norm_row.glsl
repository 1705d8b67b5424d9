// The body of norm_row.comp (64 lanes per row) and norm_row_wide.comp (256): included after
// row_reduce.glsl, the local size and the four buffers (in each .comp: embed_shaders.py counts them there).

void main() {
  uint row = row_id(), lane = gl_LocalInvocationID.x;
  if (row >= PU(0)) return;  // the whole workgroup: the barriers below stay uniform
  uint cols = PU(1), base = row * cols, hw = PU(6), G = PU(7);
  bool rms = PU(5) != 0;
  float mean = 0.0;
  if (!rms) {
    for (uint c = lane; c < cols; c += ROW_LANES) mean += float(x[base + c]);
    mean = row_sum(mean) / float(cols);
  }
  float var = 0.0;
  for (uint c = lane; c < cols; c += ROW_LANES) {
    float d = float(x[base + c]) - mean;
    var += d * d;
  }
  float inv = inversesqrt(row_sum(var) / float(cols) + PF(2));
  uint c0 = G > 0 ? (row % G) * (cols / hw) : 0;
  for (uint c = lane; c < cols; c += ROW_LANES) {
    uint ch = G > 0 ? c0 + c / hw : c;
    float v = (float(x[base + c]) - mean) * inv;
    if (PU(3) != 0) v *= float(w[ch]);
    if (PU(4) != 0) v += float(b[ch]);
    y[base + c] = T(v);
  }
}
