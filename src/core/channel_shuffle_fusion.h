// Channel shuffle fusion (see channel_shuffle_fusion.cc): run by ConvertToNhwc before it
// rewrites the graph. Returns how many shuffles became one internal ChannelShuffle node.
#pragma once

#include "core/ir.h"

namespace strata {

// Reshape [N, C, H, W] -> [N, g, C/g, H, W] -> Transpose (0, 2, 1, 3, 4) -> Reshape
// [N, C, H, W] (constant shapes, intermediates read once) -> internal ChannelShuffle(x)
// with attributes groups = g and shape = [N, C, H, W]: y[n, j * g + i] = x[n, i * (C / g) + j].
int FuseChannelShuffles(Graph& g);

}  // namespace strata
