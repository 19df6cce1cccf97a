// Rotary position embeddings (backend.h's RopeArgs), fp32, in place.
#pragma once

namespace mptrain::cpu {

// x [rows, W]: in each row r (position t = r mod T) the first `heads` heads of head_size channels
// turn channel pairs (i, i + head_size/2) by t·theta^(−2i/head_size); inverse turns back (the
// backward). The angles' cos and sin are computed as transformers' LlamaRotaryEmbedding computes
// them, in fp32: inv_freq = 1 / theta^((2i)/head_size), angle = t·inv_freq.
void rope(float* x, int rows, int W, int T, int heads, int head_size, float theta, bool inverse);

}  // namespace mptrain::cpu
