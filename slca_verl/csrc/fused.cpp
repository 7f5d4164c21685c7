// The fused CPU kernel of slca_grpo (slca_verl/fused.py builds it; slca_verl/core_algos.py documents the formulas).
// Rows are independent: at::parallel_for splits them over torch's intra-op threads.
#include <torch/extension.h>
#include <ATen/Parallel.h>

// Pass 1, one read of each row: segment rewards, presence flags and the 1-based start of the summary run.
//   mode 0 (response-mask runs): summary = the last run of mask != 0, tool = the trained tokens before it.
//   mode 1 (explicit ids, int8): 1 = tool, 2 = summary, 0 = observation; bad[i] = 1 for an id outside {0,1,2}
//          or a tool/summary id where the mask is 0.
// off[i] = 1 when a token outside both segments carries a non-zero reward (the caller then keeps these sums).
template <typename mask_t>
void pass1_impl(const float* R, const mask_t* M, const int8_t* ids, int64_t bs, int64_t L, int mode,
                float* r_tool, float* r_sum, bool* has_tool, bool* has_sum, int32_t* start1, uint8_t* off,
                uint8_t* bad, float* n_tool, float* n_sum) {
  at::parallel_for(0, bs, 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const float* r = R + i * L;
      const mask_t* m = M + i * L;
      float st = 0.f, ss = 0.f, nt = 0.f, ns = 0.f, offsum = 0.f;
      int32_t s1 = 0, x = 0;
      if (mode == 0) {
        int64_t last = L - 1;
        while (last >= 0 && m[last] == 0) --last;
        int64_t start = last;
        while (start > 0 && m[start - 1] != 0) --start;
        const int64_t stop = last >= 0 ? start : L;  // tokens [0, stop) are tool or observation
        for (int64_t t = 0; t < stop; ++t) {          // branch-free: vectorised
          const float w = m[t] != 0 ? 1.f : 0.f;
          st += r[t] * w;
          nt += w;
          offsum += r[t] != 0.f ? 1.f - w : 0.f;
        }
        for (int64_t t = stop; t <= last; ++t) ss += r[t];  // the summary run: every token trained
        for (int64_t t = last + 1; t < L; ++t) offsum += r[t] != 0.f ? 1.f : 0.f;
        ns = last >= 0 ? static_cast<float>(last - start + 1) : 0.f;
        s1 = last >= 0 ? static_cast<int32_t>(start + 1) : 0;
      } else {
        const int8_t* d = ids + i * L;
        for (int64_t t = 0; t < L; ++t) {
          const int8_t k = d[t];
          const float wt = k == 1 ? 1.f : 0.f, ws = k == 2 ? 1.f : 0.f;
          st += r[t] * wt;
          ss += r[t] * ws;
          nt += wt;
          ns += ws;
          offsum += (k == 0 && r[t] != 0.f) ? 1.f : 0.f;
          x |= (k < 0 || k > 2 || (k != 0 && m[t] == 0)) ? 1 : 0;
        }
      }
      r_tool[i] = st; r_sum[i] = ss; n_tool[i] = nt; n_sum[i] = ns;
      has_tool[i] = nt > 0.f; has_sum[i] = ns > 0.f; start1[i] = s1; off[i] = offsum > 0.f; bad[i] = x != 0;
    }
  });
}

std::vector<torch::Tensor> pass1(torch::Tensor R, torch::Tensor M, torch::Tensor ids, int64_t mode) {
  const int64_t bs = R.size(0), L = R.size(1);
  auto f = torch::TensorOptions().dtype(torch::kFloat32);
  auto r_tool = torch::empty({bs}, f), r_sum = torch::empty({bs}, f);
  auto has_tool = torch::empty({bs}, torch::kBool), has_sum = torch::empty({bs}, torch::kBool);
  auto start1 = torch::empty({bs}, torch::kInt32);
  auto off = torch::empty({bs}, torch::kUInt8), bad = torch::empty({bs}, torch::kUInt8);
  auto n_tool = torch::empty({bs}, f), n_sum = torch::empty({bs}, f);
  const int8_t* idp = mode == 1 ? ids.data_ptr<int8_t>() : nullptr;
  AT_DISPATCH_ALL_TYPES_AND(at::kBool, M.scalar_type(), "slca_pass1", [&] {
    pass1_impl<scalar_t>(R.data_ptr<float>(), M.data_ptr<scalar_t>(), idp, bs, L, static_cast<int>(mode),
                         r_tool.data_ptr<float>(), r_sum.data_ptr<float>(), has_tool.data_ptr<bool>(),
                         has_sum.data_ptr<bool>(), start1.data_ptr<int32_t>(), off.data_ptr<uint8_t>(),
                         bad.data_ptr<uint8_t>(), n_tool.data_ptr<float>(), n_sum.data_ptr<float>());
  });
  return {r_tool, r_sum, has_tool, has_sum, start1, off, bad, n_tool, n_sum};
}

// Pass 2, one write of each row: adv[i, t] = A_tool[i] on tool tokens, A_sum[i] on summary tokens, 0 elsewhere,
// written as a * mask (a float times an exact 1.0 or 0.0), as verl's grpo writes scalars * response_mask.
template <typename mask_t>
void pass2_impl(const mask_t* M, const int8_t* ids, const int32_t* start1, const float* a_tool, const float* a_sum,
                int64_t bs, int64_t L, int mode, float* out) {
  at::parallel_for(0, bs, 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const mask_t* m = M + i * L;
      float* o = out + i * L;
      const float at = a_tool[i], as = a_sum[i];
      if (mode == 0) {
        const int64_t s = start1[i] > 0 ? static_cast<int64_t>(start1[i]) - 1 : L;  // L: no summary run
        for (int64_t t = 0; t < s; ++t) o[t] = at * (m[t] != 0 ? 1.f : 0.f);
        for (int64_t t = s; t < L; ++t) o[t] = as * (m[t] != 0 ? 1.f : 0.f);
      } else {
        const int8_t* d = ids + i * L;
        for (int64_t t = 0; t < L; ++t) o[t] = d[t] == 1 ? at : (d[t] == 2 ? as : 0.f);
      }
    }
  });
}

torch::Tensor pass2(torch::Tensor M, torch::Tensor ids, torch::Tensor start1, torch::Tensor a_tool,
                    torch::Tensor a_sum, int64_t mode) {
  const int64_t bs = M.size(0), L = M.size(1);
  auto out = torch::empty({bs, L}, torch::TensorOptions().dtype(torch::kFloat32));
  const int8_t* idp = mode == 1 ? ids.data_ptr<int8_t>() : nullptr;
  AT_DISPATCH_ALL_TYPES_AND(at::kBool, M.scalar_type(), "slca_pass2", [&] {
    pass2_impl<scalar_t>(M.data_ptr<scalar_t>(), idp, start1.data_ptr<int32_t>(), a_tool.data_ptr<float>(),
                         a_sum.data_ptr<float>(), bs, L, static_cast<int>(mode), out.data_ptr<float>());
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pass1", &pass1, "slca_grpo pass 1");
  m.def("pass2", &pass2, "slca_grpo pass 2");
}
