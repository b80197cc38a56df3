// Enumerated graphs -> rule patterns. Parameters the generator derived from
// concrete extents become dim_of terms of tensors of the same pattern, so a
// rule found on the generator's small shapes applies to any shapes:
//   split.at       the extent recorded by the concat history
//   enlarge.kh/kw  the extents of the kernel it is enlarged to
//   constants      the extents of the tensor they combine with (their
//                  consumer's other operand), else the recorded tie.
#include "gen.hpp"

namespace tsopt::gen {

namespace {

struct builder {
    const mgraph& g;
    std::span<const int> var_of;  // input id -> variable index
    std::vector<int> first_out;   // op -> first tensor id

    explicit builder(const mgraph& gg, std::span<const int> v) : g(gg), var_of(v) {
        first_out.assign(g.ops.size(), -1);
        for (int t = static_cast<int>(g.producer.size()) - 1; t >= g.num_inputs; --t) first_out[g.producer[t]] = t;
    }
    spec::value_ref ref(int t) const {
        if (t < g.num_inputs) return spec::var_ref(var_of[t]);
        return spec::node_ref(g.producer[t], g.out_index[t]);
    }
    // First consumer of tensor t: (op index, input slot), or (-1, -1).
    std::pair<int, int> consumer(int t) const {
        for (std::size_t k = 0; k < g.ops.size(); ++k)
            for (int i = 0; i < g.ops[k].nin; ++i)
                if (g.ops[k].in[i] == t) return {static_cast<int>(k), i};
        return {-1, -1};
    }
    spec::pattern_node node(std::size_t k) const {
        using spec::op_kind;
        const gop& op = g.ops[k];
        const auto& d = spec::decl(op.kind);
        const auto& pv = param_values(op.pidx);
        spec::pattern_node n;
        n.op = op.kind;
        n.num_inputs = op.nin;
        for (int i = 0; i < op.nin; ++i) n.inputs[i] = ref(op.in[i]);
        for (int i = 0; i < d.num_params; ++i) n.params[i] = spec::pconst(pv[i]);
        auto dim = [&](int t, int dd) { return spec::pdim(ref(t), dd); };
        auto [ck, cslot] = consumer(first_out[k]);
        const gop* c = ck >= 0 ? &g.ops[ck] : nullptr;
        auto other = [&]() { return c->in[1 - cslot]; };
        // A consumer-derived extent must refer to an earlier tensor (patterns
        // are topologically ordered; a later one would make a cycle).
        if (c && c->nin == 2 && other() >= first_out[k]) c = nullptr;
        switch (op.kind) {
            case op_kind::split: n.params[spec::split_p::at] = dim(op.tie[0], op.tie_dim[0]); break;
            case op_kind::enlarge:
                n.params[spec::enlarge_p::kh] = dim(op.tie[0], 2);
                n.params[spec::enlarge_p::kw] = dim(op.tie[0], 3);
                break;
            case op_kind::cpool:
                n.params[spec::cpool_p::c] =
                    c && c->kind == op_kind::conv2d && cslot == 1 ? dim(c->in[0], 1) : dim(op.tie[0], 1);
                break;
            case op_kind::iconv: {
                auto ch = c && c->kind == op_kind::conv2d && cslot == 1 ? dim(c->in[0], 1) : dim(op.tie[0], 1);
                // (c->in[0] is other() here, earlier than the constant.)
                n.params[spec::iconv_p::co] = n.params[spec::iconv_p::ci] = ch;
                if (op.tie[1] != no_tensor) n.params[spec::iconv_p::k] = dim(op.tie[1], 2);
                break;
            }
            case op_kind::imatmul:
                if (c && c->kind == op_kind::matmul)
                    n.params[spec::imatmul_p::n] = cslot == 1 ? dim(other(), g.shapes[other()].rank - 1)
                                                              : dim(other(), g.shapes[other()].rank - 2);
                else
                    n.params[spec::imatmul_p::n] = dim(op.tie[0], op.tie_dim[0]);
                break;
            case op_kind::iewmul: {
                int t = c && (c->kind == op_kind::ewmul || c->kind == op_kind::ewadd) ? other() : op.tie[0];
                int r = pv[spec::iewmul_p::rank];
                for (int i = 0; i < r; ++i) n.params[spec::iewmul_p::d0 + i] = dim(t, i);
                for (int i = r; i + spec::iewmul_p::d0 < spec::max_params; ++i) n.params[spec::iewmul_p::d0 + i] = {};
                break;
            }
            default: break;
        }
        return n;
    }
};

}  // namespace

rule_patterns to_patterns(const mgraph& src, const mgraph& dst, std::span<const int> perm, const options&) {
    std::vector<int> var_of(static_cast<std::size_t>(src.num_inputs), -1);
    std::uint32_t used = src.vars | dst.vars;
    int nv = 0;
    for (int i = 0; i < src.num_inputs; ++i)
        if (used >> i & 1) var_of[i] = nv++;
    rule_patterns r;
    builder bs(src, var_of), bd(dst, var_of);
    for (std::size_t k = 0; k < src.ops.size(); ++k) r.src.push_back(bs.node(k));
    for (std::size_t k = 0; k < dst.ops.size(); ++k) r.dst.push_back(bd.node(k));
    for (std::size_t i = 0; i < src.outputs.size(); ++i) {
        r.src_out.push_back(bs.ref(src.outputs[i]));
        r.dst_out.push_back(bd.ref(dst.outputs[static_cast<std::size_t>(perm[i])]));
    }
    return r;
}

}  // namespace tsopt::gen
