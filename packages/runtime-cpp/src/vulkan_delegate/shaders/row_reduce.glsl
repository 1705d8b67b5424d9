// Workgroup-wide sum and max of one float per invocation, for the one-workgroup-per-row shaders
// (softmax_row, norm_row, reduce_row; local size ROW_LANES). The `sg` variants (SUBGROUP) reduce each
// subgroup with subgroupAdd/subgroupMax and the subgroups' partials through shared memory, for any
// subgroup size that divides ROW_LANES (NVIDIA 32, lavapipe 8); the plain ones (the runtime's choice on a
// device without subgroup arithmetic in compute shaders, or under VKDG_SUBGROUP=0) a shared-memory tree.
// Every invocation of the workgroup must call them (they hold barriers) and gets the result. A shader may
// define ROW_LANES (a power of two) before including this, with its local size to match (norm_row_wide).
#ifndef ROW_LANES
#define ROW_LANES 64
#endif
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
shared float row_partial[ROW_LANES];

// The row a workgroup reduces: the runtime folds more than 65535 workgroups into y.
uint row_id() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#ifdef SUBGROUP
#define ROW_REDUCE(NAME, OP, SUBGROUP_OP)                                  \
  float NAME(float v) {                                                    \
    v = SUBGROUP_OP(v);                                                    \
    if (subgroupElect()) row_partial[gl_SubgroupID] = v;                   \
    barrier();                                                             \
    float r = row_partial[0];                                              \
    for (uint s = 1; s < gl_NumSubgroups; ++s) r = OP(r, row_partial[s]);  \
    barrier();                                                             \
    return r;                                                              \
  }
#else
#define ROW_REDUCE(NAME, OP, SUBGROUP_OP)                                  \
  float NAME(float v) {                                                    \
    uint lane = gl_LocalInvocationID.x;                                    \
    row_partial[lane] = v;                                                 \
    barrier();                                                             \
    for (uint s = ROW_LANES / 2; s > 0; s >>= 1) {                         \
      if (lane < s) row_partial[lane] = OP(row_partial[lane], row_partial[lane + s]); \
      barrier();                                                           \
    }                                                                      \
    float r = row_partial[0];                                              \
    barrier();                                                             \
    return r;                                                              \
  }
#endif
float add_op(float a, float b) { return a + b; }
float max_op(float a, float b) { return max(a, b); }
float min_op(float a, float b) { return min(a, b); }
ROW_REDUCE(row_sum, add_op, subgroupAdd)
ROW_REDUCE(row_max, max_op, subgroupMax)
ROW_REDUCE(row_min, min_op, subgroupMin)
