// Graphs as bytes. Between a team's processes (docs/generator.md, "On
// MPI"): each process walks the enumeration's subtrees it draws, then sends
// every graph to the process that owns its fingerprint, so that each bucket
// of equal fingerprints is whole on one process and no process holds every
// graph; the surviving candidate pairs are gathered to every process. In
// checkpoints: the candidates of the finished partitions. Packed: the
// candidates a run keeps through its verification.
#include "gen.hpp"

namespace tsopt::gen {

namespace {
// The outputs of a graph without operators (inputs), as materialize() takes them.
std::uint16_t trivial_of(const mgraph& g) {
    std::uint16_t trivial = 0;
    if (g.ops.empty())
        for (int t : g.outputs) trivial = static_cast<std::uint16_t>(trivial | 1u << t);
    return trivial;
}

void write_op(byte_writer& w, const gop& op) {
    w.pod(op.kind);
    w.pod(op.nin);
    w.pod(op.in);
    w.pod(op.tie);
    w.pod(op.tie_dim);
    w.pod(param_values(op.pidx));
}
gop read_op(byte_reader& in) {
    gop op;
    op.kind = in.pod<spec::op_kind>();
    if (!spec::is_declared(op.kind))
        throw error("generator: a stored graph names operator " + std::to_string(static_cast<int>(op.kind)));
    op.nin = in.pod<std::uint8_t>();
    op.in = in.pod<decltype(op.in)>();
    op.tie = in.pod<decltype(op.tie)>();
    op.tie_dim = in.pod<decltype(op.tie_dim)>();
    op.pidx = intern_params(in.pod<spec::op_params>());
    return op;
}

// A record with its operators, parameter values and value hashes as bytes
// (one process's interned parameter ids mean nothing to another), and back:
// read_record appends it to pool `pool` of `into`.
void write_record(byte_writer& w, const enumeration& e, const graph_rec& r) {
    w.pod(r.fp);
    w.pod(r.trivial);
    w.pod(r.nops);
    std::size_t outputs = 0;
    for (std::size_t k = 0; k < r.nops; ++k) {
        const gop& op = e.pools[r.pool][r.off + k];
        write_op(w, op);
        outputs += static_cast<std::size_t>(spec::decl(op.kind).num_outputs);
    }
    for (std::size_t j = 0; j < outputs; ++j) w.pod(e.hash_pools[r.pool][r.hoff + j]);
}

graph_rec read_record(byte_reader& in, enumeration& into, std::uint8_t pool) {
    if (into.pools.size() <= pool) {
        into.pools.resize(pool + 1u);
        into.hash_pools.resize(pool + 1u);
    }
    auto& ops = into.pools[pool];
    auto& hashes = into.hash_pools[pool];
    graph_rec r;
    r.fp = in.pod<std::uint64_t>();
    r.trivial = in.pod<std::uint16_t>();
    r.nops = in.pod<std::uint8_t>();
    if (r.nops > max_graph_ops) throw error("generator: a graph record from another process has " + std::to_string(r.nops) + " operators");
    if (ops.size() + r.nops > 0xffffffffull || hashes.size() + 2u * r.nops > 0xffffffffull)
        throw error("generator: a process's share of graphs exceeds 2^32 operators");
    r.pool = pool;
    r.off = static_cast<std::uint32_t>(ops.size());
    r.hoff = static_cast<std::uint32_t>(hashes.size());
    std::size_t outputs = 0;
    for (std::size_t k = 0; k < r.nops; ++k) {
        const gop op = read_op(in);
        ops.push_back(op);
        outputs += static_cast<std::size_t>(spec::decl(op.kind).num_outputs);
    }
    for (std::size_t j = 0; j < outputs; ++j) hashes.push_back(in.pod<std::uint64_t>());
    return r;
}

// A materialized graph as bytes: its operators, parameter values and every
// tensor's value hash (read back without evaluating it).
void write_graph(byte_writer& w, const mgraph& g) {
    w.pod(trivial_of(g));
    w.pod(static_cast<std::uint8_t>(g.ops.size()));
    for (const gop& op : g.ops) write_op(w, op);
    w.pod<std::uint64_t>(g.hash.size());
    for (auto h : g.hash) w.pod(h);
}

mgraph read_graph(byte_reader& in, const options& o) {
    const auto trivial = in.pod<std::uint16_t>();
    const auto nops = in.pod<std::uint8_t>();
    if (nops > max_graph_ops) throw error("generator: a stored graph has " + std::to_string(nops) + " operators");
    std::vector<gop> ops;
    std::size_t tensors = o.inputs.size();  // operands must name tensors computed before
    for (std::size_t k = 0; k < nops; ++k) {
        const gop op = read_op(in);
        bool ok = op.nin <= op.in.size();
        for (std::size_t i = 0; i < op.nin && ok; ++i) ok = op.in[i] < tensors;
        for (auto t : op.tie) ok = ok && (t == no_tensor || t < tensors);
        if (!ok) throw error("generator: a stored graph's operator " + std::to_string(k) + " reads a tensor it cannot");
        tensors += static_cast<std::size_t>(spec::decl(op.kind).num_outputs);
        ops.push_back(op);
    }
    if (nops == 0 && trivial >> o.inputs.size()) throw error("generator: a stored graph outputs inputs it does not have");
    const auto n = in.pod<std::uint64_t>();
    if (n > 2u * max_graph_ops + 64) throw error("generator: a stored graph has " + std::to_string(n) + " value hashes");
    std::vector<std::uint64_t> hashes(n);
    for (auto& h : hashes) h = in.pod<std::uint64_t>();
    return materialize(ops, trivial, std::move(hashes), o);
}
}  // namespace

packed_pair pack(const pair& p) {
    packed_pair k;
    if (p.perm.size() > k.perm.size() || p.a.ops.size() > max_graph_ops || p.b.ops.size() > max_graph_ops)
        throw error("generator: a candidate with " + std::to_string(p.perm.size()) + " outputs and " +
                    std::to_string(p.a.ops.size()) + " + " + std::to_string(p.b.ops.size()) + " operators cannot be packed");
    k.ops.reserve(p.a.ops.size() + p.b.ops.size());
    k.ops.insert(k.ops.end(), p.a.ops.begin(), p.a.ops.end());
    k.ops.insert(k.ops.end(), p.b.ops.begin(), p.b.ops.end());
    k.hashes.reserve(p.a.hash.size() + p.b.hash.size());
    k.hashes.insert(k.hashes.end(), p.a.hash.begin(), p.a.hash.end());
    k.hashes.insert(k.hashes.end(), p.b.hash.begin(), p.b.hash.end());
    k.a_ops = static_cast<std::uint8_t>(p.a.ops.size());
    k.a_tensors = static_cast<std::uint8_t>(p.a.hash.size());
    k.a_trivial = trivial_of(p.a);
    k.b_trivial = trivial_of(p.b);
    k.outputs = static_cast<std::uint8_t>(p.perm.size());
    for (std::size_t i = 0; i < p.perm.size(); ++i) k.perm[i] = static_cast<std::uint8_t>(p.perm[i]);
    return k;
}

pair unpack(const packed_pair& k, const options& o) {
    const auto ops = std::span<const gop>(k.ops);
    const auto hashes = std::span<const std::uint64_t>(k.hashes);
    pair p{materialize(ops.first(k.a_ops), k.a_trivial, {hashes.begin(), hashes.begin() + k.a_tensors}, o),
           materialize(ops.subspan(k.a_ops), k.b_trivial, {hashes.begin() + k.a_tensors, hashes.end()}, o),
           std::vector<int>(k.perm.begin(), k.perm.begin() + k.outputs)};
    return p;
}

void write_pair(byte_writer& w, const pair& p) {
    write_graph(w, p.a);
    write_graph(w, p.b);
    w.pod<std::uint64_t>(p.perm.size());
    for (int x : p.perm) w.pod(x);
}

pair read_pair(byte_reader& in, const options& o) {
    mgraph a = read_graph(in, o), b = read_graph(in, o);
    std::vector<int> perm(in.pod<std::uint64_t>());
    if (perm.size() > b.outputs.size()) throw error("generator: a stored candidate maps more outputs than it has");
    for (int& x : perm)
        if ((x = in.pod<int>()) < 0 || static_cast<std::size_t>(x) >= b.outputs.size())
            throw error("generator: a stored candidate maps an output it does not have");
    return pair{std::move(a), std::move(b), std::move(perm)};
}

enumeration shuffle_to_owners(enumeration mine, const options& o, process_team& team, std::size_t batch, std::uint64_t* bytes_sent) {
    const auto procs = static_cast<unsigned>(team.size());
    if (batch == 0) throw error("generator: the shuffle to the fingerprints' owners needs a batch of at least one graph");
    auto owner = [&](const graph_rec& r) { return owner_of(r.fp, o.partition, o.partitions, procs); };
    // First the counts: the sender's graphs enumerated and DFS nodes, so
    // that each process ends with the team's, and how many graphs it sends
    // each process, so that the receiver places them where one exchange of
    // everything would have (sender by sender, each in its order).
    std::vector<std::uint64_t> sending(procs);
    for (const graph_rec& r : mine.graphs) ++sending[owner(r)];
    std::vector<std::string> heads;
    for (unsigned q = 0; q < procs; ++q) {
        byte_writer w;
        w.pod(mine.total_graphs);
        w.pod(mine.dfs_nodes);
        w.pod(sending[q]);
        heads.push_back(std::move(w.out));
    }
    enumeration e;
    e.input_hashes = mine.input_hashes;
    std::vector<std::size_t> at(procs), end(procs);  // where each sender's next graph goes, and its last
    auto announced = [&](unsigned q) { return end[q] - (q ? end[q - 1] : 0); };
    {
        auto from = team.all_to_all(std::move(heads));
        std::size_t total = 0;
        for (unsigned q = 0; q < procs; ++q) {
            byte_reader in{from[q]};
            e.total_graphs += in.pod<std::uint64_t>();
            e.dfs_nodes += in.pod<std::uint64_t>();
            at[q] = total;
            total += in.pod<std::uint64_t>();
            end[q] = total;
        }
        e.graphs.resize(total);
    }
    // Then the graphs, `batch` of this process's at a time: as bytes a
    // graph takes ~50 bytes an operator, twice its record, and one exchange
    // of them all put rank 0 of an N=5 run on 2 ranks at 3.99 GiB (2.35-2.61
    // GiB in rounds of a million). Each round's first byte says whether its
    // sender has more, so every process takes part until none has.
    for (std::size_t next = 0, more = 1; more;) {
        std::vector<byte_writer> to(procs);
        for (auto& w : to) w.pod<std::uint8_t>(0);
        for (const std::size_t last = std::min(mine.graphs.size(), next + batch); next < last; ++next)
            write_record(to[owner(mine.graphs[next])], mine, mine.graphs[next]);
        std::vector<std::string> out;
        for (unsigned q = 0; q < procs; ++q) {
            to[q].out[0] = static_cast<char>(next < mine.graphs.size());
            if (bytes_sent && q != static_cast<unsigned>(team.rank())) *bytes_sent += to[q].out.size();
            out.push_back(std::move(to[q].out));
        }
        to.clear();
        auto from = team.all_to_all(std::move(out));
        more = 0;
        for (unsigned q = 0; q < procs; ++q) {
            byte_reader in{from[q]};
            more |= in.pod<std::uint8_t>();
            while (!in.in.empty()) {
                if (at[q] == end[q])
                    throw error("generator: process " + std::to_string(q) + " sent more graphs than the " +
                                std::to_string(announced(q)) + " it announced");
                e.graphs[at[q]++] = read_record(in, e, static_cast<std::uint8_t>(q));
            }
            std::string().swap(from[q]);
        }
    }
    for (unsigned q = 0; q < procs; ++q)
        if (at[q] != end[q])
            throw error("generator: process " + std::to_string(q) + " sent " + std::to_string(announced(q) - (end[q] - at[q])) +
                        " graphs of the " + std::to_string(announced(q)) + " it announced");
    return e;
}

}  // namespace tsopt::gen
