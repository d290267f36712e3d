// The attention kernels' composition of their path's kernels (kernels/common/attention.hpp), compiled once
// without ISA flags: only the dense and softmax kernels it calls run the path's instructions.
#include "kernels/common/attention.hpp"

#include "kernels/common/attention_compose.hpp"

namespace halfmap::detail {

void attention_run(const AttentionArgs& a, const AttentionKernels& parts, bool prescale) {
  attention_compose(a, parts, prescale);
}

}  // namespace halfmap::detail
