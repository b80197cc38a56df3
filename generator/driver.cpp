// The generator pipeline with progress, per-phase time and memory, and the
// summary (text and JSON).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "gen.hpp"
#include "tsopt/io/atomic_file.hpp"
#include "tsopt/io/progress.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/spec/spec_hash.hpp"
#ifdef TSOPT_GEN_HAVE_VERIFIER
#include "verify/verifier.hpp"
#endif

namespace tsopt::gen {

namespace {
// The verification's threads per process (--threads, or the machine's).
unsigned verify_threads(const run_config& c) { return c.o.threads ? c.o.threads : std::max(1u, std::thread::hardware_concurrency()); }

// Under --reuse-solver with --solver-restart, the restart period a position
// falls in (a candidate's in the verification order, a generalization
// group's): a thread's solver starts afresh where a new one begins.
std::size_t solver_period_at(const run_config& c, std::size_t position) {
    if (!c.reuse_solver || !c.solver_restart_chunks) return 0;
    return position / (std::size_t{c.solver_restart_chunks} * std::max(1u, c.derive_chunk));
}
}  // namespace

#ifdef TSOPT_GEN_HAVE_VERIFIER
namespace {
// A verifier with the run's proof base and limits (one per thread).
verifier make_verifier(const run_config& c) {
    // With shape facts: Z3 relates the extents of a candidate's tensors (x is
    // square in ewmul(imatmul(dim(x, 0)), transpose(x))), which the identity
    // and diagonal axioms' constants need; at N = 3 they decide 6 more of the
    // candidates the rlimit cut (docs/generator.md).
    // An engine's registered axioms join TASO's model's (spec::proof_base).
    verifier v(spec::proof_base(), c.timeout_ms, c.rlimit, /*shape_facts=*/true);
    v.limit_instances(c.max_instances);
    v.use_mbqi(c.mbqi);
    v.reuse_solver(c.reuse_solver);
    v.try_transposed(c.try_transposed);
    return v;
}
}  // namespace
#endif

bool verifier_available() {
#ifdef TSOPT_GEN_HAVE_VERIFIER
    return true;
#else
    return false;
#endif
}

namespace {

std::uint64_t vm_hwm_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
}
void reset_peak() {
    // Linux >= 4.0: "5" resets the peak resident set size (VmHWM).
    std::ofstream f("/proc/self/clear_refs");
    if (f) f << "5";
}

// Phases with their time and peak memory; the lines go through the shared
// progress facility (a bar on a terminal, plain lines in a log).
class reporter {
public:
    explicit reporter(bool quiet) : out_(quiet, "tsopt-gen") {}
    void begin(const std::string& phase) {
        std::lock_guard lk(m_);
        phase_ = phase;
        start_ = std::chrono::steady_clock::now();
        reset_peak();
        if (out_.current() == tsopt::io::progress::mode::log) out_.line(phase + " ...");
    }
    void update(const std::string& what, std::uint64_t done, std::uint64_t total) {
        std::lock_guard lk(m_);
        if (total == 0) {
            out_.line(phase_ + " " + what + " " + std::to_string(done));
            return;
        }
        char elapsed[32];
        std::snprintf(elapsed, sizeof elapsed, " (%.1fs)", seconds());
        out_.bar(phase_, done, total, what + elapsed);
    }
    phase_stat end(const std::string& result) {
        std::lock_guard lk(m_);
        phase_stat p{phase_, seconds(), vm_hwm_kib()};
        char figures[64];
        std::snprintf(figures, sizeof figures, " (%.2fs, peak %.1f MiB)", p.seconds, p.peak_kib / 1024.0);
        out_.note(phase_ + ": " + result + figures);
        return p;
    }

private:
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
    tsopt::io::progress out_;
    std::mutex m_;
    std::string phase_;
    std::chrono::steady_clock::time_point start_;
};

std::string seconds_text(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", s);
    return b;
}

void write_file(const std::string& path, const std::string& content) { tsopt::io::write_file_atomically(path, content); }

struct oriented {
    const mgraph *src, *dst;
    std::vector<int> perm, inv;
};
oriented orient(const pair& p) {
    // The larger graph is the source; ties broken by structure (as text, not a hash) so the choice is stable.
    bool swap = p.b.ops.size() > p.a.ops.size() ||
                (p.b.ops.size() == p.a.ops.size() && structural_text(p.b) < structural_text(p.a));
    oriented o;
    std::vector<int> inv(p.perm.size());
    for (std::size_t i = 0; i < p.perm.size(); ++i) inv[static_cast<std::size_t>(p.perm[i])] = static_cast<int>(i);
    if (swap) { o.src = &p.b; o.dst = &p.a; o.perm = inv; o.inv = p.perm; }
    else { o.src = &p.a; o.dst = &p.b; o.perm = p.perm; o.inv = inv; }
    return o;
}

// A rule's text as 128 bits, where a run counts or de-duplicates texts it
// does not keep: FNV-1a over its bytes forwards and backwards (two of a few
// million texts share both with a probability of ~1e-25).
using text_digest = std::pair<std::uint64_t, std::uint64_t>;
text_digest digest_of(std::string_view text) {
    hashing::fnv1a backwards;
    for (auto c = text.rbegin(); c != text.rend(); ++c) backwards.byte(static_cast<unsigned char>(*c));
    return {hashing::fnv1a_of(text), backwards.value};
}

// A candidate's two rules (source to target and back) and whether each may
// be stated (a source without operators, or a target reading an input its
// source does not, may not).
struct directions {
    rule_patterns fw, bw;
    bool fw_ok = false, bw_ok = false;
};
directions directions_of(const pair& p, const options& opts) {
    auto o = orient(p);
    return {to_patterns(*o.src, *o.dst, o.perm, opts), to_patterns(*o.dst, *o.src, o.inv, opts),
            !o.src->ops.empty() && (o.dst->vars & ~o.src->vars) == 0, !o.dst->ops.empty() && (o.src->vars & ~o.dst->vars) == 0};
}

// How much longer the slowest process took than the mean (1: balanced).
double slowest_over_mean(const std::vector<double>& seconds) {
    double total = 0, slowest = 0;
    for (double t : seconds) total += t, slowest = std::max(slowest, t);
    const double mean = total / static_cast<double>(seconds.size());
    return mean > 0 ? slowest / mean : 1.0;
}
}  // namespace

std::string run_result::summary_text() const {
    std::ostringstream s;
    s << "graphs enumerated: " << st.graphs << " (DFS nodes " << st.dfs_nodes << ")\n"
      << "fingerprints: " << st.fingerprints << ", buckets with 2+ graphs: " << st.buckets << "\n"
      << "candidate pairs: " << st.candidates << ", confirmed on float tests: " << st.confirmed << "\n"
      << "after decomposition pruning (independent outputs): " << st.after_decomposition << "\n"
      << "after common-subgraph (inputs) pruning: " << st.after_common_inputs << "\n"
      << "after common-subgraph (outputs) pruning: " << st.after_common_outputs << "\n"
      << "after input-renaming pruning: " << st.after_renaming << "\n"
      << "with a valid rule direction: " << st.with_direction << "\n";
    if (verified)
        s << "incremental verification: " << derived << " derived from proven rules (no Z3 query; "
          << derived_rules_not_emitted << " derived rules not emitted), " << settled
          << " settled as not provable before Z3 (opaque constants); " << proven_transposed
          << " proven through their transposed mirror, " << derived_after_z3
          << " derived after Z3 did not prove them (from rules proven in their chunk or later)\n"
          << "verified: " << z3_queries << " Z3 queries, max Z3 memory " << max_z3_memory_mb << " MB; " << proven << " proven, " << unproven << " unproven, " << timeouts << " timed out, " << skipped
          << " not attempted (budget); slowest proof " << max_proof_seconds << " s; most Z3 resources of a proof "
          << max_proof_rlimit << (rlimit ? " of the rlimit " + std::to_string(rlimit) : std::string(" (no rlimit)")) << ", "
          << near_limit << (rlimit ? " proofs over half the rlimit" : " proofs over half the time limit") << "\n"
          << "thread time: derivation " << seconds_text(derive_seconds) << " s (" << seconds_text(derive_failed_seconds)
          << " s on candidates then sent to Z3 or settled), Z3 " << seconds_text(z3_proof_seconds) << " s proving, "
          << seconds_text(z3_other_seconds) << " s on queries that did not prove\n";
    else
        s << "verification: skipped (tsopt-gen built without the Z3 verifier or --no-verify): NO rule is emitted\n";
    if (verified && derive_capped) s << "derivation attempts given up at --derive-effort: " << derive_capped << "\n";
    if (resumed_partitions)
        s << "resumed from the checkpoint: the candidates of " << resumed_partitions << " fingerprint partition(s), not enumerated again\n";
    if (resumed)
        s << "resumed from the checkpoint: the outcomes of the first " << resumed << " candidates"
          << (resumed_final_pass ? ", and of the final derivation pass"
              : resumed_final_positions ? ", and of the first " + std::to_string(resumed_final_positions) +
                                              " candidates of the final derivation pass"
                                        : std::string())
          << "\n";
    if (!rank_seconds.empty()) {
        s << "processes: " << rank_seconds.size() << ", verification seconds per process:";
        for (double t : rank_seconds) s << ' ' << seconds_text(t);
        s << " (slowest " << slowest_over_mean(rank_seconds) << "x the mean)\n";
        s << "candidates each process derived in the chunks' first pass:";
        for (auto n : rank_first_pass) s << ' ' << n;
        s << "\n";
    }
    if (!rank_enumerate_seconds.empty()) {
        s << "enumeration seconds per process (its own subtrees):";
        for (double t : rank_enumerate_seconds) s << ' ' << seconds_text(t);
        s << " (slowest " << slowest_over_mean(rank_enumerate_seconds) << "x the mean)\n";
    }
    if (!rank_peak_kib.empty()) {
        s << "peak memory per process:";
        for (auto k : rank_peak_kib) s << ' ' << k / 1024 << " MiB";
        s << "\n";
    }
    if (!rank_shuffle_bytes.empty()) {
        s << "shuffle to the fingerprints' owners per process:";
        for (std::size_t q = 0; q < rank_shuffle_bytes.size(); ++q) {
            char sent[48];
            std::snprintf(sent, sizeof sent, "%.1f MiB sent", static_cast<double>(rank_shuffle_bytes[q]) / (1u << 20));
            s << ' ' << seconds_text(rank_shuffle_seconds[q]) << " s, " << sent << (q + 1 < rank_shuffle_bytes.size() ? ";" : "");
        }
        s << "\n";
    }
    s << "proven rules left out, their source outputs sharing no input: " << disconnected_sources << "\n"
      << "proven rules left out as equal to an emitted one up to commutative operand order: " << commutative_duplicates
      << "; as only reordering operands: " << commutation_only << "\n"
      << "proven rules left out as an emitted rule with outputs it leaves unchanged added: " << unchanged_outputs << "\n"
      << "proven rules left out as dead ends (they only add operators and enable no other rule): " << cost_raising_dead_ends
      << "\n"
      << "rules over parameter variables: " << generalized_rules << ", replacing " << generalized_instances
      << " enumerated instances; " << generalize_unproven << " generalizations not proven (their instances kept)\n"
      << "rules with shared operands split: " << split_rules << " (" << split_instances
      << " enumerated rules replaced, the others kept beside a variant with more nodes); "
      << split_unproven << " variants not proven by Z3, " << split_refuted << " refuted on random inputs\n"
      << "rules emitted (proven; both directions counted): " << rules.size() << "\n"
      << "candidates not proven (listed, never emitted): " << not_proven_rules << "\n";
    for (auto& p : phases) s << "phase " << p.name << ": " << seconds_text(p.seconds) << " s, peak " << p.peak_kib / 1024 << " MiB\n";
    return s.str();
}

void run_result::write_summary_json(const text_sink& out) const {
    using json = nlohmann::ordered_json;
    json phase_list = json::array();
    for (const auto& p : phases) phase_list.push_back({{"name", p.name}, {"seconds", p.seconds}, {"peak_mib", p.peak_kib / 1024.0}});
    std::vector<double> peak_mib;
    for (auto k : rank_peak_kib) peak_mib.push_back(static_cast<double>(k) / 1024.0);
    const json j = {{"schema", "tsopt-gen-summary"},
                    {"schema_version", 1},
                    {"spec_hash", spec_hash},
                    {"graphs", st.graphs},
                    {"dfs_nodes", st.dfs_nodes},
                    {"fingerprints", st.fingerprints},
                    {"buckets", st.buckets},
                    {"candidates", st.candidates},
                    {"confirmed", st.confirmed},
                    {"after_renaming", st.after_renaming},
                    {"after_common_inputs", st.after_common_inputs},
                    {"after_common_outputs", st.after_common_outputs},
                    {"with_direction", st.with_direction},
                    {"verified", verified},
                    {"derived", derived},
                    {"settled", settled},
                    {"z3_queries", z3_queries},
                    {"max_z3_memory_mb", max_z3_memory_mb},
                    {"derived_rules_not_emitted", derived_rules_not_emitted},
                    {"proven", proven},
                    {"unproven", unproven},
                    {"timeouts", timeouts},
                    {"not_verified", skipped},
                    {"rejected", unproven + timeouts + skipped},
                    {"max_proof_seconds", max_proof_seconds},
                    {"proofs_near_limit", near_limit},
                    {"max_proof_rlimit", max_proof_rlimit},
                    {"rlimit", rlimit},
                    {"proven_transposed", proven_transposed},
                    {"derived_after_z3", derived_after_z3},
                    {"derive_seconds", derive_seconds},
                    {"derive_failed_seconds", derive_failed_seconds},
                    {"derive_capped", derive_capped},
                    {"z3_proof_seconds", z3_proof_seconds},
                    {"z3_other_seconds", z3_other_seconds},
                    {"processes", std::max<std::size_t>(1, rank_seconds.size())},
                    {"process_seconds", rank_seconds},
                    {"process_enumerate_seconds", rank_enumerate_seconds},
                    {"process_shuffle_seconds", rank_shuffle_seconds},
                    {"process_shuffle_bytes", rank_shuffle_bytes},
                    {"process_peak_mib", peak_mib},
                    {"process_first_pass_candidates", rank_first_pass},
                    {"resumed_candidates", resumed},
                    {"resumed_partitions", resumed_partitions},
                    {"resumed_final_pass", resumed_final_pass},
                    {"resumed_final_positions", resumed_final_positions},
                    {"disconnected_sources", disconnected_sources},
                    {"commutative_duplicates", commutative_duplicates},
                    {"commutation_only", commutation_only},
                    {"unchanged_outputs", unchanged_outputs},
                    {"cost_raising_dead_ends", cost_raising_dead_ends},
                    {"generalized_rules", generalized_rules},
                    {"generalized_instances", generalized_instances},
                    {"generalize_unproven", generalize_unproven},
                    {"split_rules", split_rules},
                    {"split_instances", split_instances},
                    {"split_unproven", split_unproven},
                    {"split_refuted", split_refuted},
                    {"rules_emitted", rules.size()},
                    {"not_proven_rules", not_proven_rules},
                    {"phases", phase_list}};
    // The unproven listing (1.4 million lines at N=5 under a budget) goes
    // out line by line instead of being copied into the JSON value first;
    // the text is what dump(2) would write.
    std::string head = j.dump(2, ' ', false, json::error_handler_t::replace);
    head.resize(head.size() - 2);  // the closing "\n}"
    out(head);
    out(",\n  \"unproven_listing\": [");
    for (std::size_t i = 0; i < unproven_listing.size(); ++i) {
        out(i ? ",\n    " : "\n    ");
        out(json(unproven_listing[i]).dump(-1, ' ', false, json::error_handler_t::replace));
    }
    out(unproven_listing.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

std::string run_result::summary_json() const {
    std::string text;
    write_summary_json([&](std::string_view piece) { text.append(piece); });
    return text;
}

run_result run(const run_config& c) {
    run_result r;
    r.spec_hash = spec_hash();
    // With a team, this process's share of a list is every procs-th entry
    // from its rank (by position: which process decides a candidate changes
    // nothing of how it is decided).
    const std::size_t rank = c.team ? static_cast<std::size_t>(c.team->rank()) : 0;
    const std::size_t procs = c.team ? static_cast<std::size_t>(c.team->size()) : 1;
    reporter rep(c.quiet);

    // Enumeration and pairing, once per fingerprint partition (one unless
    // --partitions): only one partition's graphs are held at a time, and the
    // pairs come out in the order of a single pass.
    std::vector<packed_pair> ps;
    std::unordered_set<std::uint64_t> renamed;
    phase_stat enumerated{"enumerate"}, paired{"confirm+prune"};
    auto fold = [](phase_stat& into, const phase_stat& p) {
        into.seconds += p.seconds;
        into.peak_kib = std::max(into.peak_kib, p.peak_kib);
    };
    const unsigned parts = c.o.partitions;
    // owner_of and the records' pool index (one per sending process)
    if (procs > 255 || static_cast<std::uint64_t>(parts) * procs > (1ull << 31))
        throw error("tsopt-gen-mpi: " + std::to_string(procs) + " processes" +
                    (parts > 1 ? " x " + std::to_string(parts) + " partitions" : std::string()) +
                    ": at most 255 processes, and processes x partitions at most 2^31");
    double enumerate_seconds = 0;  // this process's own subtrees
    double shuffle_seconds = 0;    // its graphs to their owners
    std::uint64_t shuffle_bytes = 0;
    // --checkpoint: the candidates of the fingerprint partitions finished
    // so far go to FILE.candidates, rewritten atomically after each; a run
    // that finds it enumerates and pairs only the partitions after them.
    const std::string candidates_file = c.checkpoint.empty() ? std::string() : c.checkpoint + ".candidates";
    const std::string candidates_magic = "tsopt-gen candidates 1";
    const std::string candidates_identity = [&] {
        std::ostringstream id;
        id << "spec " << r.spec_hash << ", max-ops " << c.o.max_ops << ", max-outputs " << c.o.max_outputs << ", ops";
        for (auto op : c.o.ops) id << ' ' << spec::decl(op).name;
        id << ", inputs";
        for (const auto& in : c.o.inputs) {
            id << ' ' << in.name << ':' << static_cast<int>(in.r) << '[';
            for (auto d : in.s) id << d << ' ';
            id << ']';
        }
        id << ", seed " << c.o.seed << ", float tests " << c.o.float_tests << ", tolerance " << c.o.tolerance << ", two shapes "
           << c.o.two_shapes << ", representative " << c.o.representative_params << ", distinct operands " << c.o.distinct_operands
           << ", distinct values " << c.o.distinct_values << ", all-pairs limit " << c.o.all_pairs_limit << ", partitions " << parts;
        return id.str();
    }();
    unsigned first_part = 0;
    if (!candidates_file.empty() && std::filesystem::exists(candidates_file)) {
        try {
            std::ifstream in(candidates_file, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (!in && !in.eof()) throw error("cannot read it");
            byte_reader rd{bytes};
            if (rd.text() != candidates_magic) throw error("not a tsopt-gen candidates checkpoint (version 1)");
            if (auto id = rd.text(); id != candidates_identity)
                throw error("it was written by another run (" + id + "); this run: " + candidates_identity +
                            ". Delete it and " + c.checkpoint + " to start afresh, or resume with the options it was written with");
            first_part = rd.pod<unsigned>();
            if (first_part == 0 || first_part > parts) throw error("it holds " + std::to_string(first_part) + " partitions of " + std::to_string(parts));
            r.st = rd.pod<pipeline_stats>();
            for (auto n = rd.pod<std::uint64_t>(); n > 0; --n) renamed.insert(rd.pod<std::uint64_t>());
            for (auto n = rd.pod<std::uint64_t>(); n > 0; --n) ps.push_back(pack(read_pair(rd, c.o)));
            if (!rd.in.empty()) throw error(std::to_string(rd.in.size()) + " bytes follow its last candidate");
        } catch (const error& e) {
            throw error("--checkpoint " + candidates_file + ": " + e.what());
        }
        r.resumed_partitions = first_part;
    }
    if (c.team) {  // every process resumes at the same partition (one file, on a shared file system)
        byte_writer w;
        w.pod(first_part);
        for (const auto& bytes : c.team->all_gather(w.out))
            if (byte_reader{bytes}.pod<unsigned>() != first_part)
                throw team_error("--checkpoint " + candidates_file + ": the processes resume at different partitions (" +
                                 std::to_string(first_part) + " here): every rank must read the same file");
    }
    auto write_candidates = [&](unsigned done) {
        byte_writer w;
        w.text(candidates_magic);
        w.text(candidates_identity);
        w.pod(done);
        w.pod(r.st);
        w.pod<std::uint64_t>(renamed.size());
        std::vector<std::uint64_t> keys(renamed.begin(), renamed.end());
        std::sort(keys.begin(), keys.end());  // the same bytes from every run
        for (auto k : keys) w.pod(k);
        w.pod<std::uint64_t>(ps.size());
        for (const auto& p : ps) write_pair(w, unpack(p, c.o));
        write_file(candidates_file, w.out);
    };
    for (unsigned k = first_part; k < parts; ++k) {
        auto o = c.o;
        o.partition = k;
        std::string tag = parts > 1 ? " [partition " + std::to_string(k + 1) + "/" + std::to_string(parts) + "]" : "";
        rep.begin("enumerate" + tag);
        // A team's processes draw subtrees from one counter as they finish
        // the last, then each graph goes to the process owning its fingerprint.
        auto subtrees = c.team ? c.team->make_counter() : nullptr;
        const auto started = std::chrono::steady_clock::now();
        auto e = enumerate(
            o, [&](std::uint64_t d, std::uint64_t t, std::uint64_t g) { rep.update("subtrees (graphs " + std::to_string(g) + ")", d, t); },
            subtrees.get());
        enumerate_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (c.team && procs > 1) {  // (one process owns every fingerprint)
            rep.update("graphs to the processes owning their fingerprints", 0, 1);
            const auto shuffle_started = std::chrono::steady_clock::now();
            e = shuffle_to_owners(std::move(e), o, *c.team, c.shuffle_batch, &shuffle_bytes);
            shuffle_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - shuffle_started).count();
        }
        subtrees.reset();
        fold(enumerated, rep.end(std::to_string(e.total_graphs) + " graphs" +
                                 (parts > 1 ? ", " + std::to_string(e.graphs.size()) + " in this partition" : "")));
        rep.begin("confirm+prune" + tag);
        auto kept = candidates(e, o, r.st, [&](const char* w, std::uint64_t d, std::uint64_t t) { rep.update(w, d, t); }, &renamed,
                               c.team);
        e = enumeration{};  // release the graph store
        ps.insert(ps.end(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
        fold(paired, rep.end(std::to_string(r.st.candidates) + " candidates, " + std::to_string(ps.size()) + " kept"));
        if (!candidates_file.empty() && rank == 0) write_candidates(k + 1);
    }
    r.phases.push_back(enumerated);
    r.phases.push_back(paired);
    if (c.team) {  // the balance of the subtrees drawn, and what the shuffle cost each process
        byte_writer w;
        w.pod(enumerate_seconds);
        w.pod(shuffle_seconds);
        w.pod(shuffle_bytes);
        for (const auto& bytes : c.team->all_gather(w.out)) {
            byte_reader rd{bytes};
            r.rank_enumerate_seconds.push_back(rd.pod<double>());
            r.rank_shuffle_seconds.push_back(rd.pod<double>());
            r.rank_shuffle_bytes.push_back(rd.pod<std::uint64_t>());
        }
    }

    // A candidate's rules, named (the larger side the source), and the
    // direction its Z3 query takes: computed from the packed pair where they
    // are needed, not kept (at N=5 they would be ~2 KB a candidate).
    auto named_rules = [&](std::size_t i, const std::string& provenance, bool proven) {
        auto d = directions_of(unpack(ps[i], c.o), c.o);
        return name_rules(d.fw, d.bw, d.fw_ok, d.bw_ok, provenance, proven);
    };

    // 0 proven, 1 unproven (sat / gave up), 2 timeout, 3 not verified (--no-verify, budget),
    // 4 derived, 5 settled before Z3, 6 waiting for Z3 (between a chunk's two passes)
    std::vector<int> status(ps.size(), 3);
    std::vector<std::string> details(ps.size());
    std::vector<std::uint64_t> used(ps.size(), 0);              // Z3 resources each query spent
    std::vector<std::uint64_t> used_transposed(ps.size(), 0);   // a proof through the transposed mirror: its cost
    std::vector<std::vector<std::string>> derived_from;         // the rules a derivation applied
    r.rlimit = c.rlimit;
    r.verified = c.verify && verifier_available();
    if (r.verified) {
#ifdef TSOPT_GEN_HAVE_VERIFIER
        rep.begin("verify");
        unsigned nt = verify_threads(c);
        // Smallest candidates first (under a budget, the cheap proofs are not
        // lost; incremental verification derives larger candidates from the
        // smaller ones' rules), then by structure, so the order and with it
        // the rules available to each derivation do not depend on threads.
        // Structure as text under the renaming of the inputs that spells it
        // first, the two sides unordered: neither a hash value nor which of
        // two renamed copies the renaming step kept (the first in
        // fingerprint order) moves a candidate in the order.
        std::vector<std::size_t> order(ps.size());
        std::uint64_t order_digest = 0;  // of the keys in this order: a checkpoint's identity
        {
            std::vector<std::pair<std::string, std::string>> keys(ps.size());
            const auto renamings = input_renamings(c.o);
            for (std::size_t i = 0; i < order.size(); ++i) {
                order[i] = i;
                const pair p = unpack(ps[i], c.o);
                for (std::size_t r = 0; r < renamings.size(); ++r) {
                    std::pair<std::string, std::string> k{structural_text(p.a, renamings[r]), structural_text(p.b, renamings[r])};
                    if (k.second < k.first) std::swap(k.first, k.second);  // and whichever side orient() makes the source
                    if (r == 0 || k < keys[i]) keys[i] = std::move(k);
                }
            }
            std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) {
                auto sx = ps[x].ops.size(), sy = ps[y].ops.size();
                return sx != sy ? sx < sy : keys[x] < keys[y];
            });
            hashing::fnv1a f;
            for (auto i : order) {
                f.text(keys[i].first);
                f.text(keys[i].second);
            }
            order_digest = f.value;
        }  // the keys released: at N=5 they are ~1 GiB
        std::atomic<std::size_t> next{0}, done{0};
        std::atomic<std::uint64_t> n_proven{0}, n_to{0}, n_derived{0};
        std::vector<double> secs(ps.size(), 0), dsecs(ps.size(), 0);
        std::vector<std::uint64_t> inst(ps.size(), 0), mem(ps.size(), 0);
        derived_from.assign(ps.size(), {});
        auto t0 = std::chrono::steady_clock::now();
        auto over_budget = [&] {
            return c.budget_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > c.budget_s;
        };
        // Rules proven so far (Z3 only: a derived candidate adds nothing a
        // deeper derivation from the same rules would not reach).
        rule_base base(c.o, c.derive_depth, 256, c.derive_effort);
        // Chunks of a fixed size: a candidate may use every rule proven in an
        // earlier chunk (deterministic whatever the thread count).
        const std::size_t chunk = std::max<std::size_t>(1, c.derive_chunk);
        std::size_t chunk_begin = 0, chunk_end = 0;
        // Each chunk runs in two passes. Pass 1 (candidates handed out
        // dynamically): derivation and settling, no Z3. Pass 2: Z3 on the
        // rest. With a reused solver (--reuse-solver) a verdict may depend on
        // the queries the solver answered before, so pass 2 hands out its
        // queries by position (query j to thread j mod threads): for a given
        // thread count the verdicts, hence the rules, are reproducible.
        std::vector<std::size_t> pending;  // pass 2's candidates, in order
        // Pass 2's queries of the earlier chunks: under --reuse-solver a team
        // deals query j of a chunk to process (queries_dealt + j) mod procs
        // (kept in checkpoints), so that a chunk's only query does not
        // always fall to process 0; otherwise its processes draw them.
        std::size_t queries_dealt = 0;
        std::atomic<std::size_t> next_query{0};
        int pass = 1;
        std::exception_ptr failure;
        std::atomic<bool> failed{false};
        std::string team_failure;  // the first failure a process reported in an exchange
        double busy = 0;           // this process's seconds in its shares of the passes
        std::size_t first_pass_here = 0;  // candidates this process took in pass 1
        // Test hook (tests/generator/mpi_test.sh): the process of this rank
        // spends 20 ms more on each candidate of pass 1, as a slower machine
        // or a run of harder candidates would, so that a test can see the
        // others take its share.
        const char* slow_rank = std::getenv("TSOPT_GEN_TEST_SLOW_RANK");
        const bool slow_here = slow_rank && c.team && std::to_string(rank) == slow_rank;
        // One candidate's outcome as bytes (team exchanges, checkpoints).
        auto put_outcome = [&](byte_writer& w, std::size_t i) {
            w.pod<std::uint64_t>(i);
            w.pod(status[i]);
            w.text(details[i]);
            w.pod(secs[i]);
            w.pod(dsecs[i]);
            w.pod(used[i]);
            w.pod(used_transposed[i]);
            w.pod(inst[i]);
            w.pod(mem[i]);
            w.pod<std::uint64_t>(derived_from[i].size());
            for (const auto& n : derived_from[i]) w.text(n);
        };
        // Reads one outcome and, unless `keep` says this process has it
        // already, takes it, updating the progress counters as the pass that
        // decided it would have.
        auto take_outcome = [&](byte_reader& rd, bool keep) {
            auto i = static_cast<std::size_t>(rd.pod<std::uint64_t>());
            if (i >= ps.size()) throw error("outcome of candidate " + std::to_string(i) + ", but there are " + std::to_string(ps.size()));
            const int before = status[i], now = rd.pod<int>();
            if (now < 0 || now > 6) throw error("candidate " + std::to_string(i) + " has the unknown status " + std::to_string(now));
            std::string detail = rd.text();
            double qsecs = rd.pod<double>(), qdsecs = rd.pod<double>();
            auto qused = rd.pod<std::uint64_t>(), qused_t = rd.pod<std::uint64_t>();
            auto qinst = rd.pod<std::uint64_t>(), qmem = rd.pod<std::uint64_t>();
            auto n_from = rd.pod<std::uint64_t>();
            if (n_from > rd.in.size()) throw error("candidate " + std::to_string(i) + " names more rules than the bytes hold");
            std::vector<std::string> from(n_from);
            for (auto& f : from) f = rd.text();
            if (keep) return;
            status[i] = now;
            details[i] = std::move(detail);
            secs[i] = qsecs;
            dsecs[i] = qdsecs;
            used[i] = qused;
            used_transposed[i] = qused_t;
            inst[i] = qinst;
            mem[i] = qmem;
            derived_from[i] = std::move(from);
            if ((before == 3 || before == 6) && now != 6) done.fetch_add(1);
            if (now != before) (now == 0 ? n_proven : now == 4 ? n_derived : n_to).fetch_add(now == 3 || now == 6 ? 0 : 1);
        };
        // Sends this process's outcomes for the candidates `mine` (and its
        // failure, if any) to the team and takes the others'. Without a
        // team, nothing to send. False when a process failed.
        auto exchange = [&](const std::vector<std::size_t>& mine) -> bool {
            if (!c.team) return !failed;
            byte_writer w;
            w.failure(failure);
            w.pod<std::uint64_t>(mine.size());
            for (auto i : mine) put_outcome(w, i);
            auto all = c.team->all_gather(w.out);
            for (std::size_t q = 0; q < all.size(); ++q) {
                byte_reader rd{all[q]};
                rd.failure(q, team_failure);
                for (auto n = rd.pod<std::uint64_t>(); n > 0; --n) take_outcome(rd, q == rank);
            }
            return team_failure.empty() && !failed;
        };
        auto timed = [&](auto&& f) {
            auto s0 = std::chrono::steady_clock::now();
            f();
            busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
        };
        // --checkpoint: what a checkpoint must agree on to be resumed (the
        // spec, the options that decide outcomes, the candidates in
        // verification order), how far the final derivation pass got, and
        // the outcomes of its first `at` positions.
        const std::string checkpoint_magic = "tsopt-gen checkpoint 3";
        // The final derivation pass's progress: its list (the Z3 non-proofs
        // when it began, in verification order: a candidate it derives
        // leaves the non-proofs, so the list cannot be recomputed on resume,
        // and a position decides the depth of its search) and how many of
        // its positions are done, in slices of `chunk`.
        struct final_pass_state {
            bool started = false, done = false;
            std::vector<std::size_t> left;
            std::size_t at = 0;
        } fin;
        const std::string identity = [&] {
            std::ostringstream id;
            id << "spec " << r.spec_hash << ", " << ps.size() << " candidates (digest " << hashing::hex(order_digest)
               << "), rlimit " << c.rlimit << ", max-instances " << c.max_instances << ", mbqi " << c.mbqi << ", transposed "
               << c.try_transposed << ", derive " << c.derive << " (depth " << c.derive_depth << ", chunk " << chunk
               << "), settle " << c.settle_opaque << ", seed " << c.o.seed;
            if (c.derive_effort) id << ", derive effort " << c.derive_effort;
            if (!c.rederive) id << ", no derivation after Z3";
            // A reused solver's verdicts depend on which queries it answered
            // since its last restart: on where they are dealt (by position,
            // over every worker of the team) and on when it restarts.
            if (c.reuse_solver)
                id << ", reuse-solver over " << nt * procs << " workers restarting every " << c.solver_restart_chunks
                   << " chunks";
            return id.str();
        }();
        // Where a checkpoint may be written and resumed: any chunk's end,
        // but under --reuse-solver only where every solver starts afresh
        // (a resumed run's solvers are fresh), and the end of the last chunk.
        auto restarts_at = [&](std::size_t at) {
            return at == ps.size() || !c.reuse_solver || (c.solver_restart_chunks && at / chunk % c.solver_restart_chunks == 0);
        };
        auto write_checkpoint = [&](std::size_t at) {
            byte_writer w;
            w.text(checkpoint_magic);
            w.text(identity);
            w.pod<std::uint8_t>(fin.done);
            w.pod<std::uint8_t>(fin.started);
            w.pod<std::uint64_t>(fin.left.size());
            for (auto i : fin.left) w.pod<std::uint64_t>(i);
            w.pod<std::uint64_t>(fin.at);
            w.pod<std::uint64_t>(at);
            w.pod<std::uint64_t>(queries_dealt);
            w.pod<std::uint64_t>(at);
            for (std::size_t k = 0; k < at; ++k) put_outcome(w, order[k]);
            write_file(c.checkpoint, w.out);
        };
        std::size_t resume_at = 0;
        if (!c.checkpoint.empty() && std::filesystem::exists(c.checkpoint)) {
            std::ifstream in(c.checkpoint, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (!in && !in.eof()) throw error("--checkpoint " + c.checkpoint + ": cannot read it");
            try {
                byte_reader rd{bytes};
                if (rd.text() != checkpoint_magic) throw error("not a tsopt-gen checkpoint of this version (3)");
                if (auto id = rd.text(); id != identity)
                    throw error("it was written by another run (" + id + "); this run: " + identity +
                                ". Delete it to start afresh, or resume with the options it was written with");
                const auto done_flag = rd.pod<std::uint8_t>(), started_flag = rd.pod<std::uint8_t>();
                if (done_flag > 1 || started_flag > 1 || done_flag > started_flag)
                    throw error("its final derivation pass flags are corrupt");
                const auto n_left = rd.pod<std::uint64_t>();
                if (n_left > ps.size()) throw error("its final derivation pass lists more candidates than there are");
                std::vector<std::size_t> left(static_cast<std::size_t>(n_left));
                for (auto& i : left)
                    if ((i = static_cast<std::size_t>(rd.pod<std::uint64_t>())) >= ps.size())
                        throw error("its final derivation pass lists candidate " + std::to_string(i) + " of " +
                                    std::to_string(ps.size()));
                const auto final_at = rd.pod<std::uint64_t>();
                if (final_at > n_left || (done_flag && final_at != n_left) || (!started_flag && (n_left || final_at)))
                    throw error("its final derivation pass position " + std::to_string(final_at) + " does not fit its " +
                                std::to_string(n_left) + " candidates");
                auto at = rd.pod<std::uint64_t>();
                if (started_flag && at != ps.size())
                    throw error("it marks the final derivation pass begun before the last chunk");
                fin = {started_flag == 1, done_flag == 1, std::move(left), static_cast<std::size_t>(final_at)};
                auto dealt = rd.pod<std::uint64_t>();
                if (at > ps.size() || (at % chunk != 0 && at != ps.size()))
                    throw error("its position " + std::to_string(at) + " is no chunk boundary of " + std::to_string(ps.size()) +
                                " candidates");
                if (!restarts_at(static_cast<std::size_t>(at)))
                    throw error("its position " + std::to_string(at) + " is no chunk where the solvers restart (every " +
                                std::to_string(c.solver_restart_chunks) + " chunks of " + std::to_string(chunk) + ")");
                if (rd.pod<std::uint64_t>() != at) throw error("it holds another number of outcomes than its position");
                for (std::size_t k = 0; k < at; ++k) take_outcome(rd, false);
                if (!rd.in.empty()) throw error(std::to_string(rd.in.size()) + " bytes follow its last outcome");
                for (std::size_t k = 0; k < at; ++k)
                    if (status[order[k]] == 6) throw error("a candidate it holds still waits for Z3");
                // Those the final pass has yet to take are Z3 non-proofs;
                // those it took are too, or derived.
                for (std::size_t k = 0; k < fin.left.size(); ++k)
                    if (const int st = status[fin.left[k]]; st != 1 && st != 2 && (k >= fin.at || st != 4))
                        throw error("its final derivation pass lists candidate " + std::to_string(fin.left[k]) +
                                    ", which is no Z3 non-proof (status " + std::to_string(st) + ")");
                resume_at = static_cast<std::size_t>(at);
                queries_dealt = static_cast<std::size_t>(dealt);
            } catch (const error& e) {
                throw error("--checkpoint " + c.checkpoint + ": " + e.what());
            }
            // The rule base as those chunks left it: their Z3-proven rules, in order.
            if (c.derive)
                for (std::size_t k = 0; k < resume_at; ++k)
                    if (status[order[k]] == 0)
                        for (auto& er : named_rules(order[k], "", true))
                            base.add(er.r);
            r.resumed = resume_at;
            r.resumed_final_pass = fin.done;
            r.resumed_final_positions = fin.at;
        }
        // A team's processes draw each pass's positions from one counter,
        // first come first served, as the enumeration draws its subtrees: a
        // process that drew cheap derivations takes more, instead of waiting
        // at the chunk's exchange for the one dealt the slow ones. Every
        // outcome depends on its candidate alone (the rule base is fixed
        // within a pass), so the listing does not depend on who drew what.
        // Not pass 2 under --reuse-solver: a reused solver's verdict depends
        // on the queries it answered before, so those stay dealt by position.
        // The counter only grows: every drawing thread of every process
        // draws once past a pass's end, so the next pass begins `drawers`
        // values after it on every process, with no exchange of where.
        std::unique_ptr<process_team::counter> positions;
        std::uint64_t positions_base = 0, drawers = 0;
        std::mutex draw_m;
        std::vector<std::size_t> drawn;  // this process's positions of the pass
        if (c.team) {  // every process resumes at the same place (one file, on a shared file system)
            byte_writer w;
            w.pod<std::uint64_t>(resume_at);
            w.pod<std::uint64_t>(nt);
            for (const auto& bytes : c.team->all_gather(w.out)) {
                byte_reader rd{bytes};
                if (rd.pod<std::uint64_t>() != resume_at)
                    throw team_error("--checkpoint " + c.checkpoint + ": the processes resume at different candidates (" +
                                     std::to_string(resume_at) + " here): every rank must read the same file");
                drawers += rd.pod<std::uint64_t>();
            }
            if (procs > 1) positions = c.team->make_counter();
        }
        // The next position of a pass over n, or n when none is left.
        auto draw = [&](std::size_t n) -> std::size_t {
            std::lock_guard lk(draw_m);
            const std::uint64_t v = positions->fetch_add(1) - positions_base;
            if (v >= n) return n;
            drawn.push_back(static_cast<std::size_t>(v));
            return static_cast<std::size_t>(v);
        };
        // After a pass over n that was drawn: the ids its positions name.
        auto end_of_draws = [&](std::size_t n, auto&& at) {
            positions_base += n + drawers;
            std::vector<std::size_t> mine;
            for (auto k : drawn) mine.push_back(at(k));
            drawn.clear();
            return mine;
        };
        auto last_checkpoint = std::chrono::steady_clock::now();
        std::mutex cm;
        std::condition_variable cv_work, cv_done;
        std::size_t generation = 0, active = 0;
        bool stop = false;
        {
            std::vector<std::jthread> ts;
            for (unsigned t = 0; t < nt; ++t)
                ts.emplace_back([&, t] {
                    try {
                        verifier v = make_verifier(c);
                        // The restart period this thread's solver was made in (a
                        // run starts, or resumes, at the beginning of one).
                        std::size_t solver_period = solver_period_at(c, resume_at);
                        std::size_t seen_gen = 0;
                        auto query = [&](std::size_t i) {
                            const auto d = directions_of(unpack(ps[i], c.o), c.o);
                            const auto& p = d.fw_ok ? d.fw : d.bw;
                            candidate cand{p.src, p.dst, p.src_out, p.dst_out};
                            auto res = v.prove(cand);
                            if (res.wall_clock)
                                throw error("wall-clock guard: the Z3 query for " +
                                            io::format_rule_text(p.src, p.src_out, p.dst, p.dst_out) + " ran " +
                                            seconds_text(res.seconds) + " s, past --timeout-ms " +
                                            std::to_string(c.timeout_ms) + ", before Z3's deterministic limits (rlimit " +
                                            std::to_string(res.rlimit_used) + " of " + std::to_string(c.rlimit) +
                                            ", instantiations " + std::to_string(res.instances) + " of " +
                                            std::to_string(c.max_instances) +
                                            ") ended it; its verdict would depend on machine load, so no rules are "
                                            "written: raise --timeout-ms, or lower --rlimit / --max-instances");
                            status[i] = res.v == verdict::proven ? 0 : res.v == verdict::timeout ? 2 : 1;
                            details[i] = res.detail;
                            secs[i] = res.seconds;
                            used[i] = res.rlimit_used;
                            used_transposed[i] = res.transposed_rlimit_used;
                            inst[i] = res.instances;
                            mem[i] = res.memory_mb;
                            (status[i] == 0 ? n_proven : n_to).fetch_add(1, std::memory_order_relaxed);
                            done.fetch_add(1);
                        };
                        for (;;) {
                            {
                                std::unique_lock lk(cm);
                                cv_work.wait(lk, [&] { return stop || generation != seen_gen; });
                                if (stop) return;
                                seen_gen = generation;
                            }
                            if (pass == 1) {
                                const std::size_t first = first_of_share(chunk_begin, rank, procs);
                                auto next_k = [&] {
                                    return positions ? chunk_begin + draw(chunk_end - chunk_begin) : first + next.fetch_add(1) * procs;
                                };
                                for (std::size_t k; (k = next_k()) < chunk_end;) {
                                    std::size_t i = order[k];
                                    if (over_budget() || failed) { done.fetch_add(1); continue; }  // stays "not verified"
                                    if (slow_here) std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                    bool derived = false;
                                    const pair p = unpack(ps[i], c.o);
                                    if (c.derive) {
                                        auto d0 = std::chrono::steady_clock::now();
                                        derived = base.derivable(p, &derived_from[i]);
                                        dsecs[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
                                    }
                                    if (derived) {
                                        status[i] = 4;
                                        details[i] = "derived: joinable with proven rules";
                                        n_derived.fetch_add(1, std::memory_order_relaxed);
                                        done.fetch_add(1);
                                        continue;
                                    }
                                    if (c.settle_opaque) {
                                        if (auto why = opaque_constants_refute(p, c.o); !why.empty()) {
                                            status[i] = 5;
                                            details[i] = why;
                                            n_to.fetch_add(1, std::memory_order_relaxed);
                                            done.fetch_add(1);
                                            continue;
                                        }
                                    }
                                    status[i] = 6;  // to Z3 in pass 2
                                }
                            } else {
                                // By position under --reuse-solver (query j to worker j mod
                                // workers, this process's workers rank * nt ... + nt - 1),
                                // else whichever thread is free, of the team's (drawn).
                                const std::size_t workers = nt * procs;
                                const std::size_t first = first_of_share(queries_dealt, rank, procs) - queries_dealt;
                                auto free_j = [&] {
                                    return positions ? draw(pending.size()) : first + next_query.fetch_add(1) * procs;
                                };
                                auto next_j = [&](std::size_t j) { return c.reuse_solver ? j + workers : free_j(); };
                                if (solver_period_at(c, chunk_begin) != solver_period) {
                                    v = make_verifier(c);
                                    solver_period = solver_period_at(c, chunk_begin);
                                }
                                for (std::size_t j = c.reuse_solver ? rank * nt + t : free_j(); j < pending.size(); j = next_j(j))
                                    if (over_budget() || failed) { status[pending[j]] = 3; done.fetch_add(1); }
                                    else query(pending[j]);
                            }
                            std::lock_guard lk(cm);
                            if (--active == 0) cv_done.notify_all();
                        }
                    } catch (...) {
                        std::lock_guard lk(cm);
                        if (!failure) failure = std::current_exception();
                        failed = true;
                        next = ps.size();
                        next_query = ps.size();
                        if (active > 0 && --active == 0) cv_done.notify_all();
                    }
                });
            auto progress = [&] {
                rep.update("candidates (" + std::to_string(n_derived.load()) + " derived, " + std::to_string(n_proven.load()) +
                               " proven by Z3, " + std::to_string(n_to.load()) + " not)",
                           done.load(), ps.size());
            };
            auto run_pass = [&](int which) {
                {
                    std::lock_guard lk(cm);
                    pass = which;
                    active = nt;
                    ++generation;
                }
                cv_work.notify_all();
                std::unique_lock lk(cm);
                while (active > 0 && !failed) {
                    cv_done.wait_for(lk, std::chrono::milliseconds(200));
                    lk.unlock();
                    progress();
                    lk.lock();
                }
            };
            // A Z3 non-proof derived once more from the rules proven so far.
            auto rederive = [&](std::size_t i, int depth) {
                // Past --budget-s a Z3 non-proof stays one: at N=5 the final
                // pass over 82,601 of them went on past the budget at a few
                // a second.
                if ((status[i] != 1 && status[i] != 2) || over_budget()) return;
                auto d0 = std::chrono::steady_clock::now();
                bool derived = base.derivable(unpack(ps[i], c.o), &derived_from[i], depth);
                dsecs[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
                if (!derived) return;
                status[i] = 4;
                details[i] = "derived after Z3 did not prove it: joinable with proven rules";
                n_derived.fetch_add(1, std::memory_order_relaxed);
            };
            // This process's share of positions [b, e) of a list: those equal
            // to its rank mod procs.
            auto share = [&](std::size_t b, std::size_t e, auto&& at) {
                std::vector<std::size_t> mine;
                for (std::size_t k = first_of_share(b, rank, procs); k < e; k += procs) mine.push_back(at(k));
                return mine;
            };
            auto of_order = [&](std::size_t k) { return order[k]; };
            // The ids of the positions [b, e) this process took in a pass:
            // those it drew, or its share.
            auto took = [&](std::size_t b, std::size_t e, auto&& at) {
                if (!positions) return share(b, e, at);
                return end_of_draws(e - b, [&](std::size_t k) { return at(b + k); });
            };
            // Rederive positions [b, e) of a list on every thread of every
            // process, the threads drawing them from one counter (or taking
            // this process's share) as the passes do: the base does not
            // change while they run, so each outcome depends on its
            // candidate alone. `depth(j)`: the search depth at position j.
            // Returns the ids this process took.
            auto rederive_positions = [&](const std::vector<std::size_t>& list, std::size_t b, std::size_t e, auto&& depth) {
                const std::size_t first = first_of_share(b, rank, procs);
                std::atomic<std::size_t> at{0};
                auto next_j = [&] { return positions ? b + draw(e - b) : first + at.fetch_add(1) * procs; };
                auto work = [&] {
                    try {
                        for (std::size_t j; (j = next_j()) < e && !failed;) rederive(list[j], depth(j));
                    } catch (...) {
                        std::lock_guard lk(cm);
                        if (!failure) failure = std::current_exception();
                        failed = true;
                    }
                };
                timed([&] {
                    std::vector<std::jthread> helpers;
                    for (unsigned t = 1; t < nt; ++t) helpers.emplace_back(work);
                    work();
                });
                return took(b, e, [&](std::size_t k) { return list[k]; });
            };
            for (std::size_t b = resume_at; b < ps.size() && !failed; b = chunk_end) {
                chunk_begin = b;
                chunk_end = std::min(ps.size(), b + chunk);
                next = 0;
                timed([&] { run_pass(1); });
                auto first_pass = took(b, chunk_end, of_order);
                first_pass_here += first_pass.size();
                if (!exchange(first_pass)) break;
                pending.clear();
                for (std::size_t k = b; k < chunk_end; ++k)
                    if (status[order[k]] == 6) pending.push_back(order[k]);
                next_query = 0;
                if (!pending.empty() && !failed) {
                    timed([&] { run_pass(2); });
                    std::vector<std::size_t> mine;
                    if (positions && !c.reuse_solver)
                        mine = end_of_draws(pending.size(), [&](std::size_t j) { return pending[j]; });
                    else
                        for (std::size_t j = 0; j < pending.size(); ++j)
                            if ((c.reuse_solver ? j % (nt * procs) / nt : (queries_dealt + j) % procs) == rank)
                                mine.push_back(pending[j]);
                    queries_dealt += pending.size();
                    if (!exchange(mine)) break;
                }
                // The chunk's Z3-proven rules join the base, in order.
                if (c.derive) {
                    for (std::size_t k = b; k < chunk_end; ++k) {
                        std::size_t i = order[k];
                        if (status[i] != 0) continue;
                        for (auto& er : named_rules(i, "", true)) base.add(er.r);
                    }
                    // Before giving up on the chunk's Z3 non-proofs: derivation
                    // again, now with the rules its own proofs added (one step
                    // of the transposed mirror and an axiom, say). Every
                    // process lists the same ones: it holds every outcome.
                    std::vector<std::size_t> non_proofs;
                    for (std::size_t k = b; k < chunk_end; ++k)
                        if (status[order[k]] == 1 || status[order[k]] == 2) non_proofs.push_back(order[k]);
                    if (c.rederive && !non_proofs.empty() &&
                        !exchange(rederive_positions(non_proofs, 0, non_proofs.size(), [](std::size_t) { return -1; })))
                        break;
                }
                if (!c.checkpoint.empty() && rank == 0 && restarts_at(chunk_end) &&
                    (chunk_end == ps.size() ||
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint).count() >= c.checkpoint_every_s)) {
                    write_checkpoint(chunk_end);
                    last_checkpoint = std::chrono::steady_clock::now();
                }
            }
            // Last, every remaining Z3 non-proof against the whole rule base
            // (a rule proven in a later chunk may join it); the first
            // final_derive_limit of them, in order, deeper (a deep search
            // over N=4's thousands of non-proofs and 15,000 rules would take
            // hours). The base no longer changes, so each outcome depends on
            // the candidate alone and the threads share the list. In slices
            // of `chunk` positions, each exchanged and checkpointed like a
            // chunk: a run killed inside the pass resumes after the slices
            // its checkpoint holds.
            if (c.derive && c.rederive && !failed && team_failure.empty() && !fin.done) {
                if (!fin.started) {
                    for (std::size_t k = 0; k < ps.size(); ++k)
                        if (status[order[k]] == 1 || status[order[k]] == 2) fin.left.push_back(order[k]);
                    fin.started = true;
                    fin.at = 0;
                }
                // Test hook (tests/generator/checkpoint_test.sh): end the
                // process as SIGKILL would, right after the checkpoint of the
                // given number of slices, so that a test can resume from
                // inside the pass however fast this machine runs it.
                const char* kill_after = std::getenv("TSOPT_GEN_TEST_KILL_AFTER_FINAL_SLICES");
                int slices_written = 0;
                for (std::size_t fb = fin.at; !fin.done && !failed;) {
                    const std::size_t fe = std::min(fin.left.size(), fb + chunk);
                    auto depth = [&](std::size_t j) { return j < c.final_derive_limit ? c.final_derive_depth : -1; };
                    if (!exchange(rederive_positions(fin.left, fb, fe, depth))) break;
                    fin.at = fb = fe;
                    fin.done = fe == fin.left.size();
                    rep.update("final derivation pass over the " + std::to_string(fin.left.size()) + " Z3 non-proofs (" +
                                   std::to_string(n_derived.load()) + " derived in all)",
                               fin.at, fin.left.size());
                    // Its outcomes kept too: a run killed after it does not redo it.
                    if (!c.checkpoint.empty() && rank == 0 &&
                        (fin.done ||
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint).count() >=
                             c.checkpoint_every_s)) {
                        write_checkpoint(ps.size());
                        last_checkpoint = std::chrono::steady_clock::now();
                        if (kill_after && ++slices_written == std::atoi(kill_after)) std::_Exit(137);
                    }
                }
            }
            {
                std::lock_guard lk(cm);
                stop = true;
            }
            cv_work.notify_all();
        }
        if (!team_failure.empty()) throw team_error(team_failure);
        if (failure) std::rethrow_exception(failure);
        positions.reset();  // collective: every process ends its draws here
        r.derive_capped = base.capped();
        if (c.team) {
            byte_writer w;
            w.pod(busy);
            w.pod<std::uint64_t>(first_pass_here);
            w.pod<std::uint64_t>(base.capped());
            r.derive_capped = 0;
            for (const auto& bytes : c.team->all_gather(w.out)) {
                byte_reader rd{bytes};
                r.rank_seconds.push_back(rd.pod<double>());
                r.rank_first_pass.push_back(rd.pod<std::uint64_t>());
                r.derive_capped += rd.pod<std::uint64_t>();
            }
        }
        for (std::size_t i = 0; i < ps.size(); ++i) {
            auto s = status[i];
            r.derive_seconds += dsecs[i];
            if (s != 4) r.derive_failed_seconds += dsecs[i];
            if (s <= 2) (s == 0 ? r.z3_proof_seconds : r.z3_other_seconds) += secs[i];
            if (s == 4 && secs[i] > 0) {  // derived after a Z3 query that did not prove it
                r.z3_other_seconds += secs[i];
                ++r.z3_queries;
                ++r.derived_after_z3;
            }
            if (s == 4) { ++r.derived; continue; }
            if (s == 5) { ++r.unproven; ++r.settled; continue; }
            (s == 0 ? r.proven : s == 1 ? r.unproven : s == 2 ? r.timeouts : r.skipped)++;
            if (s <= 2) ++r.z3_queries;
            if (s == 0) r.max_proof_seconds = std::max(r.max_proof_seconds, secs[i]);
            const auto cost = std::max(used[i], used_transposed[i]);  // of the proof's queries, the largest
            if (s == 0 && (c.rlimit ? 2.0 * static_cast<double>(cost) > c.rlimit : secs[i] * 1000.0 > 0.5 * c.timeout_ms))
                ++r.near_limit;
            if (s == 0) r.max_proof_rlimit = std::max(r.max_proof_rlimit, cost);
            if (s == 0 && used_transposed[i]) ++r.proven_transposed;
            r.max_z3_memory_mb = std::max(r.max_z3_memory_mb, mem[i]);
        }
        if (!c.query_log_out.empty()) {
            static const char* names[] = {"proven", "unproven", "timeout", "not-verified", "derived", "settled"};
            std::ostringstream log;
            log << "# verdict\tseconds\trlimit_used\tinstantiations\tmax_memory_mb\trule (timeout-ms " << c.timeout_ms << ", rlimit " << c.rlimit << ")\n";
            for (std::size_t i = 0; i < ps.size(); ++i) {
                auto named = named_rules(i, "", false);
                log << names[status[i]] << '\t' << secs[i] << '\t' << used[i] << '\t' << inst[i] << '\t' << mem[i] << '\t'
                    << (named.empty() ? std::string("?") : io::format_rule_line(named[0].r)) << '\n';
            }
            write_file(c.query_log_out, log.str());
        }
        r.phases.push_back(rep.end(std::to_string(r.derived) + " derived, " + std::to_string(r.proven) + " proven by Z3, " +
                                   std::to_string(r.unproven) + " unproven (" + std::to_string(r.settled) +
                                   " settled before Z3), " + std::to_string(r.timeouts) + " timed out, " +
                                   std::to_string(r.skipped) + " not attempted (budget)"));
#endif
    } else
        r.skipped = ps.size();

    // The team's processes hold the same outcomes now: each goes on (the
    // generalization's queries are shared too); process 0 writes the files.
    const bool writes = rank == 0;

    rep.begin("emit");
    const std::string by = "generated by tsopt-gen (N<=" + std::to_string(c.o.max_ops) + "), ";
    const std::string spec_tail = ", spec " + r.spec_hash;
    auto of_limit = [&](std::uint64_t u) {
        return std::to_string(u) + (c.rlimit ? " / " + std::to_string(c.rlimit) : std::string(", no limit"));
    };
    auto z3_provenance = [&](std::size_t i) {
        return by + "proven by Z3 (rlimit " +
               (used_transposed[i] ? of_limit(used_transposed[i]) + " for its transposed mirror, " + of_limit(used[i]) +
                                         " for the step back"
                                   : of_limit(used[i])) +
               ") against " + std::to_string(spec::all_axioms.size() + spec::extension_axioms().size()) + " axioms" + spec_tail;
    };
    auto derived_provenance = [&](std::size_t i) {
        std::string from;
        for (const auto& n : derived_from[i]) from += (from.empty() ? "" : ", ") + n;
        return by + (from.empty() ? std::string("derived by rewriting (both sides build the same graph)")
                                  : "derived from rules " + from + " by rewriting") +
               " (incremental verification; those rules proven by Z3)" + spec_tail;
    };
    std::string unprov = by + "NOT PROVEN (confirmed on random inputs only; never applied)" + spec_tail;
    static const char* verdicts[] = {"proven", "unproven", "timeout", "not-verified", "derived", "unproven"};
    // One entry per rule text: a rule stated by several candidates keeps the
    // strongest provenance (Z3 over derived), whatever order they come in.
    std::map<std::string, emitted_rule> by_z3, by_derivation;
    // Derived rules neither emitted nor kept (keep_unemitted) are counted
    // by their texts' digests, each with whether its source is connected.
    const bool derived_named = c.emit_derived || c.keep_unemitted;
    std::vector<std::pair<text_digest, bool>> derived_digests;
    std::set<text_digest> texts_np;
    for (std::size_t i = 0; i < ps.size(); ++i) {
        if (status[i] == 0) {
            for (auto& er : named_rules(i, z3_provenance(i), true))
                by_z3.try_emplace(er.r.text, std::move(er));
            continue;
        }
        if (status[i] == 4) {
            if (derived_named)
                for (auto& er : named_rules(i, derived_provenance(i), true)) by_derivation.try_emplace(er.r.text, std::move(er));
            else
                for (auto& er : named_rules(i, "", true)) derived_digests.emplace_back(digest_of(er.r.text), source_connected(er.r));
            continue;
        }
        // Listed for inspection only (JSON, --unproven file); never in the header or rules.txt.
        for (auto& er : named_rules(i, unprov, false))
            if (texts_np.insert(digest_of(er.r.text)).second) {
                r.unproven_listing.push_back(std::string(verdicts[status[i]]) + ": " + io::format_rule_line(er.r) +
                                             (details[i].empty() ? "" : "  (" + details[i] + ")"));
                ++r.not_proven_rules;
                if (c.keep_unemitted) r.not_proven.push_back(std::move(er));
            }
    }
    std::set<text_digest>().swap(texts_np);
    // Nothing below reads the candidates or their outcomes again: at N=5
    // (1.1 million candidates) they are ~0.6 GiB that the generalization and
    // the last emit phase, the run's peak, would hold beside their own.
    auto release = [](auto&... v) { ((v = std::remove_reference_t<decltype(v)>{}), ...); };
    release(ps, renamed, status, details, used, used_transposed, derived_from);
    for (auto* m : {&by_z3, &by_derivation})
        std::erase_if(*m, [&](const auto& e) {
            if (source_connected(e.second.r)) return false;
            ++r.disconnected_sources;
            return true;
        });
    std::sort(derived_digests.begin(), derived_digests.end());
    derived_digests.erase(std::unique(derived_digests.begin(), derived_digests.end(),
                                      [](const auto& x, const auto& y) { return x.first == y.first; }),
                          derived_digests.end());
    std::erase_if(derived_digests, [&](const auto& d) {
        if (d.second) return false;
        ++r.disconnected_sources;
        return true;
    });
    // The rules a variant with shared operands split replaced: emitted in
    // that wider form, so a rule adding unchanged outputs to one is left out
    // as it would be beside the rule itself.
    std::set<commutative_key> split_away;
#ifdef TSOPT_GEN_HAVE_VERIFIER
    // The rewriting phases after naming (operand splits, generalization):
    // the first ends the naming phase.
    bool naming_open = true;
    auto begin_rewriting_phase = [&](const char* name) {
        if (naming_open) r.phases.push_back(rep.end(std::to_string(by_z3.size()) + " proven rules named"));
        naming_open = false;
        rep.begin(name);
    };
    // Names: a rewritten rule whose reverse was rewritten too is named as a
    // pair, as the enumerated ones are.
    auto name_as_pairs = [](std::map<std::string, emitted_rule>& rules) {
        for (auto& [text, er] : rules) {
            const io::listed_rule* rev = nullptr;
            try {
                auto back = canonical_rule(io::format_rule_text(er.r.dst, er.r.dst_out, er.r.src, er.r.src_out));
                if (auto it = rules.find(back.text); it != rules.end()) rev = &it->second.r;
            } catch (const error&) {
                // The reverse binds a variable only the target reads: one-way.
            }
            er.r.name = rule_pair_name(er.r, rev);
        }
    };
    // One Z3 query per group under the run's limits, dealt to threads by
    // position and each in a fresh context (unless --reuse-solver, as in
    // the verification): the outcome does not depend on load.
    auto prove_groups = [&](const std::vector<generalization_group>& groups) {
        std::vector<verify_result> res(groups.size(), verify_result{verdict::unproven, 0, {}});
        // With a team, group i goes to worker i mod (threads x processes),
        // process rank's workers being rank * nt ... rank * nt + nt - 1.
        unsigned nt = std::max(1u, std::min<unsigned>(verify_threads(c),
                                                      static_cast<unsigned>(groups.size())));
        std::atomic<std::size_t> done{0};
        std::exception_ptr failure;
        std::mutex fm;
        {
            std::vector<std::jthread> ts;
            for (unsigned t = 0; t < nt; ++t)
                ts.emplace_back([&, t] {
                    try {
                        verifier v = make_verifier(c);
                        // Afresh at each restart period's groups too (by position,
                        // as the queries are dealt): at N=5 the reused solvers of
                        // 140,000 groups grew to ~4 GiB.
                        std::size_t solver_period = 0;
                        for (std::size_t i = rank * nt + t; i < groups.size(); i += nt * procs) {
                            if (solver_period_at(c, i) != solver_period) {
                                v = make_verifier(c);
                                solver_period = solver_period_at(c, i);
                            }
                            const auto& g = groups[i].general;
                            res[i] = v.prove(candidate{g.src, g.dst, g.src_out, g.dst_out});
                            if (res[i].wall_clock)
                                throw error("wall-clock guard: the Z3 query for the rule " + g.text + " ran " +
                                            seconds_text(res[i].seconds) + " s, past --timeout-ms " +
                                            std::to_string(c.timeout_ms) +
                                            "; its verdict would depend on machine load, so no rules are written: raise "
                                            "--timeout-ms, or lower --rlimit / --max-instances");
                            rep.update("groups", ++done, groups.size());
                        }
                    } catch (...) {
                        std::lock_guard lk(fm);
                        if (!failure) failure = std::current_exception();
                    }
                });
        }
        if (c.team) {  // every process's verdicts, and its failure
            byte_writer w;
            w.failure(failure);
            for (std::size_t i = rank * nt; i < groups.size(); i += nt * procs)
                for (std::size_t k = i; k < std::min(groups.size(), i + nt); ++k) {
                    w.pod<std::uint64_t>(k);
                    w.pod(res[k].v);
                    w.pod(res[k].rlimit_used);
                }
            auto all = c.team->all_gather(w.out);
            std::string team_failure;
            for (std::size_t q = 0; q < all.size(); ++q) {
                byte_reader rd{all[q]};
                rd.failure(q, team_failure);
                while (!rd.in.empty()) {
                    auto k = static_cast<std::size_t>(rd.pod<std::uint64_t>());
                    auto v = rd.pod<verdict>();
                    auto used_k = rd.pod<std::uint64_t>();
                    if (k >= groups.size()) throw error("generator: a team exchange names group " + std::to_string(k));
                    res[k].v = v;
                    res[k].rlimit_used = used_k;
                }
            }
            if (!team_failure.empty()) throw team_error(team_failure);
        }
        if (failure) std::rethrow_exception(failure);
        return res;
    };
    if (c.split_operands && r.verified && !by_z3.empty()) {
        begin_rewriting_phase("split operands");
        std::vector<emitted_rule> proven_rules;
        for (auto& [text, er] : by_z3) proven_rules.push_back(std::move(er));
        by_z3.clear();  // refilled below: proven_rules holds them meanwhile
        auto plan = plan_operand_splits(proven_rules, c.o);
        r.split_refuted = plan.refuted;
        auto res = prove_groups(plan.groups);
        // Each rule takes its first proven variant; a variant no rule takes
        // (each preferred another) is not emitted. A match maps pattern
        // nodes to distinct graph nodes, so a variant that copied a shared
        // node (two transposes of ?x and ?y for one transpose of ?x) does not
        // match where the rule did: the rule stays beside it. A variant with
        // as many nodes matches wherever the rule did and replaces it.
        std::vector<std::size_t> taken_by(plan.groups.size(), 0);
        std::vector<char> replaced(proven_rules.size(), 0);
        for (std::size_t i = 0; i < proven_rules.size(); ++i)
            for (std::size_t g : plan.tries[i])
                if (res[g].v == verdict::proven) {
                    ++taken_by[g];
                    if (plan.groups[g].general.src.size() == proven_rules[i].r.src.size()) {
                        replaced[i] = 1;
                        ++r.split_instances;
                        split_away.insert(commutative_form(proven_rules[i].r));
                    }
                    break;
                }
        std::map<std::string, emitted_rule> split;  // by text
        for (std::size_t g = 0; g < plan.groups.size(); ++g) {
            if (res[g].v != verdict::proven) {
                ++r.split_unproven;
                continue;
            }
            if (!taken_by[g]) continue;
            std::string prov = by + "proven by Z3 (rlimit " + of_limit(res[g].rlimit_used) + ") with shared operands split (" +
                               plan.groups[g].slots + "; from " + std::to_string(taken_by[g]) + " enumerated rule" +
                               (taken_by[g] == 1 ? "" : "s") + ") against " +
                               std::to_string(spec::all_axioms.size() + spec::extension_axioms().size()) + " axioms" + spec_tail;
            split.try_emplace(plan.groups[g].general.text, emitted_rule{plan.groups[g].general, prov, true});
        }
        name_as_pairs(split);
        for (std::size_t i = 0; i < proven_rules.size(); ++i) {
            if (!replaced[i])
                by_z3.try_emplace(proven_rules[i].r.text, std::move(proven_rules[i]));
            else if (c.keep_unemitted)
                r.split_left_out.push_back(std::move(proven_rules[i]));
        }
        for (auto& [text, er] : split) r.split_rules += by_z3.try_emplace(text, std::move(er)).second;
        r.phases.push_back(rep.end(std::to_string(r.split_rules) + " rules with shared operands split, replacing " +
                                   std::to_string(r.split_instances) + " enumerated; " + std::to_string(r.split_unproven) +
                                   " variants not proven, " + std::to_string(r.split_refuted) + " refuted on random inputs"));
    }
    if (c.generalize && r.verified && !by_z3.empty()) {
        begin_rewriting_phase("generalize");
        std::vector<emitted_rule> proven_rules;
        for (auto& [text, er] : by_z3) proven_rules.push_back(std::move(er));
        by_z3.clear();  // refilled below: proven_rules holds them meanwhile
        std::vector<char> replaced(proven_rules.size(), 0);
        std::map<std::string, emitted_rule> general;  // by text
        std::set<std::string> failed;                 // generalizations Z3 did not prove
        std::vector<std::size_t> pending(proven_rules.size());
        for (std::size_t i = 0; i < pending.size(); ++i) pending[i] = i;
        for (const auto& keep : generalization_levels()) {
            auto groups = generalization_groups(proven_rules, pending, keep);
            std::erase_if(groups, [&](const generalization_group& g) { return failed.count(g.general.text) > 0; });
            if (groups.empty()) continue;
            auto res = prove_groups(groups);
            for (std::size_t i = 0; i < groups.size(); ++i) {
                if (res[i].v != verdict::proven) {
                    failed.insert(groups[i].general.text);
                    continue;
                }
                for (auto m : groups[i].members) replaced[m] = 1;
                r.generalized_instances += groups[i].members.size();
                std::string prov = by + "proven by Z3 (rlimit " + of_limit(res[i].rlimit_used) + ") over parameter variables (" +
                                   groups[i].slots + ": any value; " + std::to_string(groups[i].members.size()) +
                                   " enumerated instance" + (groups[i].members.size() == 1 ? "" : "s") + " replaced) against " +
                                   std::to_string(spec::all_axioms.size() + spec::extension_axioms().size()) + " axioms" + spec_tail;
                general.try_emplace(groups[i].general.text, emitted_rule{groups[i].general, prov, true});
            }
            std::erase_if(pending, [&](std::size_t m) { return replaced[m] != 0; });
        }
        r.generalize_unproven = failed.size();
        name_as_pairs(general);
        for (std::size_t i = 0; i < proven_rules.size(); ++i)
            if (!replaced[i]) by_z3.try_emplace(proven_rules[i].r.text, std::move(proven_rules[i]));
        for (auto& [text, er] : general) by_z3.try_emplace(text, std::move(er));
        r.generalized_rules = general.size();
        r.phases.push_back(rep.end(std::to_string(r.generalized_rules) + " rules over parameter variables replace " +
                                   std::to_string(r.generalized_instances) + " enumerated; " +
                                   std::to_string(r.generalize_unproven) + " generalizations not proven"));
    }
    if (!naming_open) rep.begin("emit");
#endif
    // One rule per class of rules equal up to commutative operand order, the
    // first by text; none that only reorders operands (commutative_form).
    std::set<commutative_key> kept;
    {
        for (auto* m : {&by_z3, &by_derivation}) {
            if (m == &by_derivation && !c.emit_derived) continue;  // not emitted anyway
            std::erase_if(*m, [&](const auto& e) {
                const commutative_key k = commutative_form(e.second.r);
                if (k.src == k.dst) {
                    ++r.commutation_only;
                } else {
                    if (m == &by_derivation && by_z3.count(e.first)) return false;  // emitted once, as proven (below)
                    if (kept.insert(k).second) return false;
                    ++r.commutative_duplicates;
                }
                // Kept for inspection only where the run keeps what it does not emit.
                if (c.keep_unemitted) r.commutative_left_out.push_back(e.second);
                return true;
            });
        }
    }
    // Then the rules that add unchanged outputs to an emitted rule
    // (changed_outputs_only): the emitted rule builds what they build.
    for (auto* m : {&by_z3, &by_derivation}) {
        if (m == &by_derivation && !c.emit_derived) continue;
        std::erase_if(*m, [&](const auto& e) {
            if (m == &by_derivation && by_z3.count(e.first)) return false;
            const auto rest = changed_outputs_only(e.second.r);
            if (!rest) return false;
            const commutative_key k = commutative_form(*rest);
            if (!kept.count(k) && !split_away.count(k)) return false;
            ++r.unchanged_outputs;
            if (c.keep_unemitted) r.unchanged_outputs_left_out.push_back(e.second);
            return true;
        });
    }
    // Then the dead ends among what would be emitted (cost_raising_dead_ends).
    {
        std::vector<std::pair<std::map<std::string, emitted_rule>*, std::string>> at;
        std::vector<const io::listed_rule*> emitted;
        for (auto* m : {&by_z3, &by_derivation}) {
            if (m == &by_derivation && !c.emit_derived) continue;
            for (const auto& [text, er] : *m) {
                if (m == &by_derivation && by_z3.count(text)) continue;
                at.emplace_back(m, text);
                emitted.push_back(&er.r);
            }
        }
        const auto dead = cost_raising_dead_ends(emitted);
        for (std::size_t i = 0; i < at.size(); ++i) {
            if (!dead[i]) continue;
            auto node = at[i].first->extract(at[i].second);
            if (c.keep_unemitted) r.dead_ends_left_out.push_back(std::move(node.mapped()));
            ++r.cost_raising_dead_ends;
        }
    }
    std::uint64_t n_z3_rules = by_z3.size(), n_derived_rules = 0;
    for (auto& [text, er] : by_z3) r.rules.push_back(std::move(er));
    for (auto& [text, er] : by_derivation) {
        if (by_z3.count(text)) continue;  // a Z3-proven rule also stated by a derived candidate: emitted once, as proven
        if (c.emit_derived) {
            r.rules.push_back(std::move(er));
            ++n_derived_rules;
        } else
            r.derived_rules.push_back(std::move(er));
    }
    r.derived_rules_not_emitted = r.derived_rules.size();
    if (!derived_digests.empty()) {
        std::set<text_digest> z3_texts;
        for (const auto& e : r.rules) z3_texts.insert(digest_of(e.r.text));
        for (const auto& d : derived_digests) r.derived_rules_not_emitted += z3_texts.count(d.first) == 0;
    }
    auto by_name = [](auto& x, auto& y) { return x.r.name < y.r.name; };
    std::sort(r.rules.begin(), r.rules.end(), by_name);
    std::sort(r.derived_rules.begin(), r.derived_rules.end(), by_name);
    std::sort(r.unproven_listing.begin(), r.unproven_listing.end());
    for (std::size_t i = 1; i < r.rules.size(); ++i)
        if (r.rules[i].r.name == r.rules[i - 1].r.name)
            throw error("generator: two rules named " + r.rules[i].r.name + ":\n  " + r.rules[i - 1].r.text + "\n  " + r.rules[i].r.text);
    std::uint64_t np = r.unproven + r.timeouts + r.skipped;
    std::string limits = c.rlimit > 0 ? "rlimit " + std::to_string(c.rlimit) + " and " + std::to_string(c.max_instances) +
                                            " instantiations per query, a query reaching the " +
                                            std::to_string(c.timeout_ms) + " ms wall-clock guard aborts the run"
                                      : std::to_string(c.timeout_ms) + " ms per query, reaching it aborts the run";
    // A reused solver's verdicts depend on how the queries were dealt and
    // when the solvers restarted: the listing says so.
    if (c.reuse_solver) {
        limits += "; one Z3 solver per worker, " + std::to_string(verify_threads(c) * procs) + " workers" +
                  (c.solver_restart_chunks ? ", restarted every " + std::to_string(c.solver_restart_chunks) + " chunks"
                                           : std::string());
    }
    // How the graphs were enumerated, so a snapshot says which run made it.
    std::vector<std::string> disciplines;
    if (c.o.representative_params) disciplines.push_back("representative parameters");
    if (c.o.distinct_operands) disciplines.push_back("distinct operands");
    if (c.o.distinct_values) disciplines.push_back("distinct values");
    if (c.o.all_pairs_limit != options{}.all_pairs_limit)
        disciplines.push_back("all-pairs limit " + std::to_string(c.o.all_pairs_limit));
    std::string enumeration;
    for (const auto& d : disciplines) enumeration += (enumeration.empty() ? " (" : ", ") + d;
    if (!enumeration.empty()) enumeration += ")";
    std::string head = "max_ops " + std::to_string(c.o.max_ops) + enumeration + ", " + std::to_string(r.rules.size()) + " rules: " +
                       std::to_string(n_z3_rules) + " proven by Z3 (" + std::to_string(spec::all_axioms.size() + spec::extension_axioms().size()) +
                       " axioms, " + limits + ")" +
                       (c.emit_derived ? ", " + std::to_string(n_derived_rules) +
                                             " derived by rewriting from those (each names its sources)"
                                       : std::string()) +
                       "; " + std::to_string(np) + " candidates not proven were left out" +
                       (r.verified ? "" : " (verification was off)") +
                       (r.derived ? "; " + std::to_string(r.derived) + " candidates derived from proven rules (" +
                                        (c.emit_derived ? "emitted" : "not emitted") + ")"
                                  : std::string()) +
                       (c.derive && !c.rederive ? "; no derivation after Z3 (--no-rederive: some candidates not proven may be derivable)"
                                                : std::string()) +
                       (c.budget_s > 0 ? "; verification budget " + seconds_text(c.budget_s) +
                                             " s (wall clock: which candidates were attempted depends on machine load)"
                                       : std::string());
    r.phases.push_back(rep.end(std::to_string(r.rules.size()) + " rules, " + std::to_string(r.not_proven_rules) + " not proven (not emitted)"));
    if (c.team) {  // each process's peak (its phases'), which only process 0's phase lines show
        std::uint64_t peak = 0;
        for (const auto& p : r.phases) peak = std::max(peak, p.peak_kib);
        byte_writer w;
        w.pod(peak);
        for (const auto& bytes : c.team->all_gather(w.out)) r.rank_peak_kib.push_back(byte_reader{bytes}.pod<std::uint64_t>());
    }
    if (!writes) return r;
    // Every file streamed, none held as one string: a budgeted N=5 run's
    // header is 0.5 GiB of text, its unproven listing and summary 0.5-0.7
    // GiB each (docs/generator.md, "Memory at N=5"). The header goes to its
    // temporary first: when it cannot be written (a rule not proven, an
    // unwritable name, the disk) neither it nor the listing replaces what
    // was there; the summary and the unproven listing are written whatever
    // happens to it (they say what was and was not proven), then its error
    // is raised.
    auto stream_to = [](const std::string& path, auto&& produce) {
        io::atomic_file_writer w(path);
        produce([&](std::string_view piece) { w.write(piece); });
        w.commit();
    };
    std::string header_error;
    {
        std::optional<io::atomic_file_writer> header;
        if (!c.header_out.empty()) {
            try {
                header.emplace(c.header_out);
                write_header(r.rules, r.spec_hash, head, np, r.verified, c.header_namespace,
                             [&](std::string_view piece) { header->write(piece); });
            } catch (const error& e) {
                header_error = e.what();
                header.reset();
            }
        }
        if (header_error.empty()) {
            if (!c.listing_out.empty())
                stream_to(c.listing_out, [&](const text_sink& out) { write_listing(r.rules, r.spec_hash, head, out); });
            if (header) header->commit();
        }
    }
    if (!c.unproven_out.empty())
        stream_to(c.unproven_out, [&](const text_sink& out) { write_unproven_listing(r.unproven_listing, r.spec_hash, head, out); });
    if (!c.summary_out.empty()) stream_to(c.summary_out, [&](const text_sink& out) { r.write_summary_json(out); });
    if (!header_error.empty()) throw error(header_error);
    return r;
}

}  // namespace tsopt::gen
