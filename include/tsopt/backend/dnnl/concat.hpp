#pragma once
// n-ary concat on oneDNN over row-major inputs (a blocked input is reordered
// first) into a row-major result.
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

inline void lower_concat(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const int ax = n.params[spec::concat_p::axis];
    const int k = static_cast<int>(n.inputs.size());
    std::vector<tref> xs;
    for (int s = 0; s < k; ++s) xs.push_back(L.plain_in(i, s));
    std::vector<dn::memory::desc> mds;
    for (auto& x : xs) mds.push_back(x.md);
    dn::concat::primitive_desc pd(plain_md(L.out_dims(i)), ax, mds, L.p.eng, L.attr());
    tref y = L.fresh(pd.dst_desc());
    std::vector<std::pair<int, tref>> args;
    for (int s = 0; s < k; ++s) args.push_back({DNNL_ARG_MULTIPLE_SRC + s, xs[static_cast<std::size_t>(s)]});
    args.push_back({DNNL_ARG_DST, y});
    L.add<dn::concat>(i, pd, std::move(args), "concat");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
