#pragma once
// The rule generator's data model (TASO's Algorithm 1): enumerated graphs over
// a fixed set of small concrete input tensors, their fingerprints, candidate
// pairs and the pruning/confirmation steps. See docs/generator.md.
//
// Everything here reads the operator declarations (spec::operators): the set
// of operators, their parameter domains, shape rules and semantics. The only
// generator-specific knowledge is the *typing discipline* (which operator may
// take which role of tensor, see `role`) that keeps enumeration to graphs a
// DL model could contain.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tsopt/core/shape.hpp"
#include "tsopt/core/graph.hpp"
#include "tsopt/core/tensor.hpp"
#include "tsopt/spec/axiom_dsl.hpp"
#include "tsopt/spec/registry.hpp"
#include "team.hpp"

namespace tsopt::gen {

// What a tensor stands for in a model; binary element-wise operators need
// equal roles and shapes, conv2d takes (act, weight), matmul (matrix, matrix).
enum class role : std::uint8_t { act, weight, matrix, scalar };

struct input_decl {
    std::string name;
    shape s;
    role r;
};
// x, y: activations; w, v: 3x3 kernels; u: a 1x1 kernel; a, b, c: matrices;
// s: a scalar. Shapes are small so one operator evaluates in microseconds.
std::vector<input_decl> default_inputs();

// The second shape configuration every graph is also fingerprinted on: the
// same inputs with different extents (per role and axis an injective shift,
// so extents equal in the first configuration stay equal and graphs keep
// type-checking): activations [n, c-1, h+1, w+1], kernels
// [co-1, ci-1, k+2, k+2], matrices [r+1, c+1], scalars unchanged. Equalities
// that only hold at one set of extents (pad=same vs valid on 1x1 kernels,
// stride orders that coincide on small maps) get different fingerprints.
std::vector<input_decl> second_shapes(std::span<const input_decl> in);

inline constexpr std::uint8_t no_tensor = 0xff;
inline constexpr int max_graph_ops = 6;

// One operator of an enumerated graph, compact (graphs are stored by the
// million). Tensor ids: inputs 0..I-1, then each operator's outputs in order.
// Parameters are interned (`param_table`). Ties record which tensor extent a
// derived parameter equals (split point, enlarge size, constant extents):
//   split   at = dim(tie0, tie_dim0)
//   enlarge kh = dim(tie0, 2), kw = dim(tie0, 3)
//   cpool   c = dim(tie0, 1)
//   iconv   co = ci = dim(tie0, 1), k = dim(tie1, 2) (tie1 == no_tensor: constant)
//   imatmul n = dim(tie0, tie_dim0)
//   iewmul  d_i = dim(tie0, i)
struct gop {
    spec::op_kind kind{};
    std::uint8_t nin = 0;
    std::array<std::uint8_t, 2> in{no_tensor, no_tensor};
    std::uint16_t pidx = 0;
    std::array<std::uint8_t, 2> tie{no_tensor, no_tensor};
    std::array<std::uint8_t, 2> tie_dim{0, 0};
};

// Interned concrete parameter sets (thread-safe; ids are stable).
const spec::op_params& param_values(std::uint16_t id);
std::uint16_t intern_params(const spec::op_params& p);

// A stored graph: operators in a flat pool, plus the fingerprint.
struct graph_rec {
    std::uint64_t fp = 0;
    std::uint32_t off = 0;      // into the owning pool
    std::uint32_t hoff = 0;     // into the owning pool's value hashes (one per operator output)
    std::uint8_t nops = 0;
    std::uint8_t pool = 0;      // which thread's pool
    std::uint16_t trivial = 0;  // nops == 0: bitmask of inputs that are the outputs
};

struct options {
    int max_ops = 4;
    int max_outputs = 2;
    unsigned threads = 0;  // 0: hardware concurrency
    std::vector<spec::op_kind> ops;  // operators to enumerate (default: every `generated` one)
    std::uint64_t seed = 0x7a50;
    int float_tests = 3;
    double tolerance = 1e-3;
    std::vector<input_decl> inputs = default_inputs();
    // Fingerprint (and check common-subgraph pruning) on second_shapes(inputs)
    // too; graphs that do not type-check there are not enumerated.
    bool two_shapes = true;
    // TASO's enumeration disciplines, for sizes the full one cannot reach
    // (docs/generator.md, "N=4"): one representative value per structural
    // parameter (stride 1, same padding, concat axis 0 or 1; activations
    // and kernel sizes kept), so rules hold for those values only, as
    // TASO's did; and binary operators never read one tensor twice
    // (ewadd(x, x), concat(x, x), matmul(a, a)).
    bool representative_params = false;
    bool distinct_operands = false;
    // No operator reads a tensor whose value another tensor of the graph
    // has (unless that one is computed from it): such a graph is a detour
    // that a smaller rule removes (enumerate.cpp, reads_redundant_value).
    // Removes the split/concat, transpose/transpose and identity-constant
    // detours that fill N>=4 with equal graphs.
    bool distinct_values = false;
    // Buckets of more equal graphs than this pair each graph with the
    // smallest one equal to it only, not every two (candidates()).
    std::size_t all_pairs_limit = 256;
    // Fingerprint partitions: enumerate() records only the graphs whose
    // fingerprint falls in `partition` of `partitions` equal ranges (in
    // fingerprint order). Equal graphs share a fingerprint, so each bucket
    // lies in one partition: the graph store shrinks by the number of
    // partitions, at one full DFS per partition (docs/generator.md, N=5).
    unsigned partitions = 1, partition = 0;
};

// Which fingerprint partition a fingerprint lies in (monotone in fp, so
// partitions taken in order visit the buckets in fingerprint order).
inline unsigned partition_of(std::uint64_t fp, unsigned partitions) {
    return static_cast<unsigned>(((fp >> 32) * partitions) >> 32);
}
// Whether a graph with this fingerprint is recorded under o's partition.
inline bool in_partition(const options& o, std::uint64_t fp) { return partition_of(fp, o.partitions) == o.partition; }

// An operator's concrete parameters for other tensor shapes: derived
// parameters (split point, enlarge size, constant extents) follow their ties.
spec::op_params params_for_shapes(const gop& op, const spec::op_params& p, std::span<const shape> shapes);

// A graph rebuilt from its record: shapes, roles, consumers, outputs, and
// per-tensor modp hashes (one fixed random input set).
struct mgraph {
    std::vector<gop> ops;
    std::vector<shape> shapes;          // per tensor id
    std::vector<int> producer;          // op index, -1 for inputs
    std::vector<int> out_index;         // which output of its producer
    std::vector<int> uses;              // consumer count
    std::vector<std::uint64_t> hash;    // modp value hash per tensor (both shape configurations)
    std::vector<std::uint64_t> shash;   // structural hash per tensor
    std::vector<int> outputs;           // tensor ids, graph outputs
    std::uint32_t vars = 0;             // bitmask of inputs the graph reads
    int num_inputs = 0;
};

struct enumeration {
    std::vector<std::vector<gop>> pools;  // one per thread
    // Per pool, the value hashes of each record's operator outputs as the
    // enumeration computed them: materializing a record does not evaluate
    // its graph again.
    std::vector<std::vector<std::uint64_t>> hash_pools;
    std::vector<std::uint64_t> input_hashes;
    std::vector<graph_rec> graphs;
    std::uint64_t dfs_nodes = 0;
    // Graphs enumerated, including those of other fingerprint partitions
    // (options::partitions), which `graphs` does not hold.
    std::uint64_t total_graphs = 0;
};

using progress_fn = std::function<void(std::uint64_t done, std::uint64_t total, std::uint64_t graphs)>;

// Phase 1+2: depth-first enumeration with incremental modp evaluation and
// fingerprinting, in parallel over the first-level choices.
// Whether --representative-params enumerates value v of a parameter named
// `param`: stride 1, same padding, axes 0 and 1; every value of others.
bool representative_value(std::string_view param, std::int32_t v);

// The work items are the graphs of inputs alone and the subtrees below each
// first-level choice. With `items`, a team's counter, this process walks
// the items it draws from it (its calling thread draws them as its workers
// need them), and its graphs then go to the processes owning their
// fingerprints (shuffle_to_owners); without, every item.
enumeration enumerate(const options& o, const progress_fn& progress = {}, process_team::counter* items = nullptr);

// Rebuilds a record (modp hashes as the enumeration computed them).
mgraph materialize(const enumeration& e, const graph_rec& g, const options& o);

// A team's enumerations, each of the subtrees its process drew, become
// each process's enumeration of the graphs whose fingerprints it owns
// (owner_of): every bucket on one process, whole, and the processes'
// buckets in rank order in fingerprint order. Counts are the team's. In
// rounds of `batch` graphs per process (run_config::shuffle_batch), so
// that the bytes in flight stay bounded; adds the bytes this process sent
// to the others to `bytes_sent`.
enumeration shuffle_to_owners(enumeration mine, const options& o, process_team& team, std::size_t batch,
                              std::uint64_t* bytes_sent = nullptr);
// Builds a graph from its operators (modp hashes by evaluating it on the
// fingerprint input set).
mgraph materialize(std::span<const gop> ops, std::uint16_t trivial, const options& o);
// ... with the value hashes given (every tensor's: as materialize computed them).
mgraph materialize(std::span<const gop> ops, std::uint16_t trivial, std::vector<std::uint64_t> hashes, const options& o);

// Fixed random inputs shared by enumeration and materialization (`second`:
// at the second shape configuration).
const std::vector<tensor<modp>>& fingerprint_inputs(const options& o, bool second = false);

// Value hash of one tensor, and the order-independent fingerprint of a set.
std::uint64_t tensor_hash(const tensor<modp>& t);
std::uint64_t fingerprint(std::span<const std::uint64_t> output_hashes);

// Structural identity of a graph (independent of operator order), under an
// optional renaming of the inputs.
std::uint64_t structural_key(const mgraph& g, std::span<const int> rename = {});
// The same identity as text: every operator with its parameters, operands
// and ties spelled out, sorted, then the outputs. Wherever an order decides
// what the generator keeps (which of a bucket's equal graphs stand for it,
// which side of a candidate is its source, the verification order that
// incremental derivation follows) graphs are ordered by this text, not by a
// hash, so the rule set does not change when a hash function or seed does.
std::string structural_text(const mgraph& g, std::span<const int> rename = {});

// Evaluates a graph on float inputs; returns every tensor.
std::vector<tensor<float>> eval_float(const mgraph& g, std::span<const tensor<float>> inputs);
std::vector<tensor<modp>> eval_modp(const mgraph& g, std::span<const tensor<modp>> inputs);

// An equivalent pair with the output correspondence (a.outputs[i] ~ b.outputs[perm[i]]).
struct pair {
    mgraph a, b;
    std::vector<int> perm;
};

// A candidate as it is kept between its uses: both graphs' operators and
// value hashes and the output correspondence, in two allocations. A
// materialized pair (shapes, producers, consumers, structural hashes per
// tensor) is ~3 KB; N=5 keeps over a million candidates through the
// verification, so they are kept packed (~0.3 KB) and materialized where
// one is derived, settled, queried or named (docs/generator.md, "Memory at N=5").
struct packed_pair {
    std::vector<gop> ops;               // a's, then b's
    std::vector<std::uint64_t> hashes;  // every tensor's value hash, a's then b's
    std::uint8_t a_ops = 0, a_tensors = 0, outputs = 0;
    std::uint16_t a_trivial = 0, b_trivial = 0;
    std::array<std::uint8_t, 4> perm{};  // the first `outputs` entries
};
packed_pair pack(const pair& p);
// The pair pack() was given (materialize() from its operators and hashes).
pair unpack(const packed_pair& p, const options& o);

struct pipeline_stats {
    std::uint64_t graphs = 0, dfs_nodes = 0, fingerprints = 0, buckets = 0, candidates = 0, confirmed = 0,
                  after_renaming = 0, after_decomposition = 0, after_common_inputs = 0, after_common_outputs = 0, with_direction = 0;
};

// A candidate pair as bytes: both graphs with their operators, parameter
// values and value hashes, and the output correspondence (the surviving
// pairs gathered to a team's processes; the candidates of finished
// partitions in a checkpoint), and back.
void write_pair(byte_writer& w, const pair& p);
pair read_pair(byte_reader& in, const options& o);

// Phase 3+4: bucket, pair, confirm in floats, prune. Returns the survivors.
// Adds its counts to `st`. `renamed` holds the renaming keys kept so far: a
// fingerprint-partitioned run passes the same set to every partition, so a
// pair equal up to renaming to one of an earlier partition is pruned too.
// With a team, `e` holds the graphs of this process's fingerprint range
// (shuffle_to_owners): each process confirms and prunes its buckets, and
// every process returns the same survivors.
std::vector<packed_pair> candidates(const enumeration& e, const options& o, pipeline_stats& st,
                             const std::function<void(const char*, std::uint64_t, std::uint64_t)>& progress = {},
                             std::unordered_set<std::uint64_t>* renamed = nullptr, process_team* team = nullptr);

// Individual pruning predicates (exposed for tests).
bool common_subgraph_at_inputs(const pair& p, const options& o);
bool common_subgraph_at_outputs(const pair& p);
// Multi-output pairs whose outputs split into groups computed by disjoint
// operators in both graphs: implied by the smaller pairs of each group.
bool decomposes(const pair& p);
// Permutations of o.inputs that preserve role and shape (Figure 4a).
std::vector<std::vector<int>> input_renamings(const options& o);
// The pair's key under its best renaming: pairs equal up to renaming share it.
std::uint64_t renaming_key(const pair& p, std::span<const std::vector<int>> renamings);

// Readable form of a graph (debugging, tests).
std::string describe(const mgraph& g, const options& o);

}  // namespace tsopt::gen

namespace tsopt::gen {

// Patterns of the rule `src => dst` (tensor variables shared by both sides;
// derived parameters as dim_of terms).
struct rule_patterns {
    std::vector<spec::pattern_node> src, dst;
    std::vector<spec::value_ref> src_out, dst_out;
};
rule_patterns to_patterns(const mgraph& src, const mgraph& dst, std::span<const int> perm, const options& o);

}  // namespace tsopt::gen

#include "tsopt/io/rule_listing.hpp"

namespace tsopt::gen {

// ---------------------------------------------------------------- incremental verification
// (docs/verification.md "Incremental verification").

// A graph of the library IR with the enumerated graph's operators on the
// generator's inputs (`second`: at second_shapes(o.inputs), derived
// parameters following their ties); outputs in `out_order` (indices into
// m.outputs; empty: as recorded). Inputs the graph does not read are left out.
graph to_graph(const mgraph& m, const options& o, bool second = false, std::span<const int> out_order = {});

// Rules proven so far, as the library's rewrite rules, and whether a
// candidate follows from them: its two sides rewrite to a common graph
// (each within `depth` rewrites, breadth-first, at most `max_frontier` new
// graphs kept per level) with the library's matcher and rule application
// (TASO typing, shape checks), a rule firing only where its parameter
// variables take values of the domains it was proven for. Every step is a
// proven rule, so a joinable pair is proven on these instances.
class rule_base {
public:
    // `effort`: applications a join may preview, both sides together, before
    // it gives up (0: no cap): a count, so the outcome stays deterministic.
    explicit rule_base(const options& o, int depth = 2, std::size_t max_frontier = 256, std::size_t effort = 0);
    ~rule_base();
    rule_base(const rule_base&) = delete;
    rule_base& operator=(const rule_base&) = delete;
    void add(const io::listed_rule& r);  // a proven rule (one direction)
    std::size_t size() const;
    // The pair's sides (outputs in correspondence) are joinable at the first
    // shape configuration and, with options::two_shapes, at the second.
    // `used`: the names of the rules the joins applied (sorted, once each).
    // `depth`: rewrites per side for this call (-1: the base's).
    // A pair with several outputs (TASO's multi-output substitutions: two
    // convolutions or products sharing an operand, fused and split) is
    // derivable only through graphs no larger than its larger side: the
    // optimizer applies such rules in one step where they lower the cost
    // (optimize.hpp's leaf merges) and does not climb through a larger
    // graph to compose them, so one derived only uphill (x.W1, x.W2 =>
    // split(x.concat(W1, W2)) through concat(x.W1, x.W2) and its split) is
    // left to Z3 and emitted.
    bool derivable(const pair& p, std::vector<std::string>* used = nullptr, int depth = -1) const;
    // `max_ops`: graphs on the way with more operators are not followed.
    bool joinable(const graph& a, const graph& b, std::vector<std::string>* used = nullptr, int depth = -1,
                  std::size_t max_ops = std::numeric_limits<std::size_t>::max()) const;
    struct stored;
    // Rules grouped by the set of operator kinds their source needs (a few
    // hundred sets for thousands of rules): a graph is tried only against
    // the groups its own kinds cover, without touching the other rules.
    // Within a group, rules whose sources end in the same anchor (the node
    // matching starts from: kind, arity, constant parameters, kinds of its
    // operator inputs) share one quick check against the graph.
    struct anchor {
        spec::op_kind op{};
        int num_inputs = 0;
        std::uint32_t constant_slots = 0;  // parameter slots that must equal `constants`
        spec::op_params constants{};
        std::array<int, spec::max_inputs> input_kind{};    // -1: a tensor variable
        std::array<int, spec::max_inputs> input_output{};  // which output of that operator
        bool operator==(const anchor&) const = default;
    };
    struct anchored {
        anchor a;
        std::vector<const stored*> rules;
    };
    struct group {
        std::uint64_t ops_mask;
        std::vector<anchored> by_anchor;
    };
    // Which positions of a node an anchor fixes: with 150,000 rules at
    // N=5 a graph's groups held tens of thousands of anchors, each checked
    // against the graph in turn. A node is looked up under each shape its
    // kind's anchors have (a handful), by a hash of the values there.
    struct anchor_shape {
        int num_inputs = 0;
        std::uint32_t constant_slots = 0;
        std::uint32_t operator_inputs = 0;  // input slots fixed to an operator
        bool operator==(const anchor_shape&) const = default;
    };
    // An anchor of a group: (group index << 32) | index in by_anchor, so
    // that sorting restores the order the groups and anchors were made in.
    using anchor_ref = std::uint64_t;
    // The anchors of the groups whose kinds g covers that some node of g
    // may be matched to, in group and anchor order: where derivation tries
    // rules.
    void anchors_for(const graph& g, std::uint64_t kinds_mask, std::vector<anchor_ref>& out) const;
    const std::vector<group>& groups() const { return groups_; }
    // Joins given up at the effort cap so far (every thread's).
    std::uint64_t capped() const { return capped_.load(std::memory_order_relaxed); }

private:
    options o_;
    int depth_;
    std::size_t max_frontier_;
    std::size_t effort_;  // no cap: the largest size_t
    mutable std::atomic<std::uint64_t> capped_{0};
    std::vector<std::unique_ptr<stored>> rules_;
    std::vector<group> groups_;
    std::unordered_map<std::uint64_t, std::size_t> group_of_mask_;
    std::array<std::vector<anchor_shape>, spec::max_op_kinds> shapes_of_kind_;
    std::unordered_map<std::uint64_t, std::vector<anchor_ref>> anchors_by_key_;
};

// A candidate Z3 cannot settle within its limits because it mentions a
// constant operator (no inputs) that no axiom of the proof base can reach:
// every axiom node of that operator has a different literal in some
// parameter slot (e.g. iewmul at rank 2, the axioms' iewmul is the
// one-element rank 0). Such a term is an arbitrary tensor to every proof
// (changing its value changes no axiom instance), so a proof would also
// prove the pair with a random tensor in its place. Returns why the pair is
// not provable when it differs on random float inputs with that
// replacement, else "" (then Z3 decides).
std::string opaque_constants_refute(const pair& p, const options& o);

// Hash of what rules are proven against: every operator declaration
// (name, arity, parameters and their domains, class, flags) and every axiom.
std::string spec_hash();

// A rule ready to emit: canonical (parsed back from its listing text).
struct emitted_rule {
    io::listed_rule r;
    // Exact, per rule: "proven by Z3 (rlimit USED / LIMIT)", "derived from
    // rules A, B by rewriting", or NOT PROVEN with why.
    std::string provenance;
    // Proven by Z3, or derived by rewriting from rules proven by Z3; only
    // such rules enter the header.
    bool proven = false;
};

// Turns an equivalent pair into one or two named rules (`-rev` for the
// reverse direction where its target variables are bound by its source).
std::vector<emitted_rule> name_rules(const rule_patterns& forward, const rule_patterns& backward,
                                     bool forward_ok, bool backward_ok, const std::string& provenance, bool proven = false);

// A rule text ("src => dst") parsed back twice, so its nodes and variables
// are numbered as in every listed rule (canonical form). Throws on a target
// that uses a variable its source does not bind.
io::listed_rule canonical_rule(const std::string& text);

// The name a rule gets beside its reverse (nullptr: none): the hash of both
// texts, the reverse direction named "-rev" (name_rules' convention).
std::string rule_pair_name(const io::listed_rule& r, const io::listed_rule* reverse);

// ---------------------------------------------------------------- parameter variables
// (docs/generator.md, "Rules over parameter variables").

// The rule with each any_value slot name (spec::param_decl::any_value) that
// takes one value throughout the rule, is read by its source and is not in
// `keep` turned into one parameter variable, canonical; nullopt when no slot
// qualifies. `slots`: the slot names generalized.
std::optional<io::listed_rule> generalize_params(const io::listed_rule& r, std::span<const std::string_view> keep = {},
                                                 std::string* slots = nullptr);
// The slot names kept constant at each attempt, from none up.
std::span<const std::vector<std::string_view>> generalization_levels();
// The proven rules among `candidates` (indices into `rules`) grouped by their
// generalization: each group's rule, once proven, replaces its members.
struct generalization_group {
    io::listed_rule general;
    std::string slots;
    std::vector<std::size_t> members;
};
std::vector<generalization_group> generalization_groups(std::span<const emitted_rule> rules,
                                                        std::span<const std::size_t> candidates,
                                                        std::span<const std::string_view> keep = {});

// ---------------------------------------------------------------- shared operands split
// (docs/generator.md, "Shared operands split").

// One variant of a rule with the tensor variables its source reads in
// several places given a variable per read: canonical, and `split` names
// the variables split ("?a (2 reads)").
struct operand_split {
    io::listed_rule rule;
    std::string split;
};
// The variants of `r` (enumerated, concrete parameters) that agree on random
// inputs, in preference order: every shared variable split at once, then
// each alone; each target read bound to one copy, at most `max_variants`
// tried. A node read twice is copied per reader first, so the variables
// under it are read twice too (the variant then has more nodes). Shapes:
// the first assignment from `inputs`' shapes under which the rule
// type-checks. `refuted` counts the variants that differ.
std::vector<operand_split> split_shared_operands(const io::listed_rule& r, std::span<const input_decl> inputs,
                                                 const options& o, std::size_t max_variants = 32,
                                                 std::uint64_t* refuted = nullptr);
// The variants of the proven `rules`, grouped by text as generalization
// groups are (members: the rules a group's rule can replace); `tries[i]`:
// rule i's groups in its preference order.
struct operand_split_plan {
    std::vector<generalization_group> groups;
    std::vector<std::vector<std::size_t>> tries;
    std::uint64_t refuted = 0;
};
operand_split_plan plan_operand_splits(std::span<const emitted_rule> rules, const options& o, std::size_t max_variants = 32);

// Where a large text goes piece by piece (a string, or a file through
// io::atomic_file_writer): a budgeted N=5 run's unproven listing and summary
// are 0.7 GiB each, its header 0.5 GiB, too much to hold as strings beside
// the run's data.
using text_sink = std::function<void(std::string_view)>;
// The listing of proven rules (rules.txt).
std::string render_listing(std::span<const emitted_rule> rules, const std::string& spec_hash, const std::string& summary);
void write_listing(std::span<const emitted_rule> rules, const std::string& spec_hash, const std::string& summary,
                   const text_sink& out);
// Candidates that are NOT proven (verification off, failed or timed out), for
// inspection only: every rule line is commented out ("# NOT PROVEN: ..."), so
// a listing loader reads no rule from it.
std::string render_unproven_listing(std::span<const std::string> lines, const std::string& spec_hash, const std::string& summary);
void write_unproven_listing(std::span<const std::string> lines, const std::string& spec_hash, const std::string& summary,
                            const text_sink& out);
// The constexpr header. Throws when a rule is not proven: tsopt::rules::generated()
// only ever returns rules proven by Z3 or derived by rewriting from such
// rules. `unproven` is recorded as a count. `ns`: the namespace of the
// header's symbols; an engine generating its own set next to the shipped
// one (tsopt::rules) names another, e.g. "myengine::rules" (docs/install.md).
std::string render_header(std::span<const emitted_rule> rules, const std::string& spec_hash, const std::string& summary,
                          std::uint64_t unproven = 0, bool verified = true, const std::string& ns = "tsopt::rules");
// The same text, piece by piece (it throws before the first piece when a
// rule is not proven or `ns` is not a namespace).
void write_header(std::span<const emitted_rule> rules, const std::string& spec_hash, const std::string& summary,
                  std::uint64_t unproven, bool verified, const std::string& ns, const text_sink& out);
// Whether `ns` is a C++ namespace name (identifiers joined by ::).
bool valid_namespace(std::string_view ns);

// The whole pipeline (tsopt-gen's body).
struct run_config {
    options o;
    process_team* team = nullptr;    // nullptr: this process alone
    bool verify = true;
    // Proof outcomes depend on the inputs and these options only: each query
    // is bounded by Z3's deterministic limits (rlimit, instantiations); the
    // wall clock is a hang guard, and a query it ends aborts the whole run
    // (error "wall-clock guard") rather than becoming an "unknown" that
    // another machine or load would have proven. Defaults: the build's.
    unsigned timeout_ms = 60000;     // Z3 wall-clock hang guard per query
    unsigned rlimit = 500000;        // Z3 deterministic resource limit per query (0: none)
    unsigned max_instances = 10000;  // Z3 quantifier instantiations per query (0: no cap)
    bool mbqi = true;                // Z3 model-based quantifier instantiation
    bool reuse_solver = false;       // verifier::reuse_solver; Z3 queries dealt to threads by position
    // Under reuse_solver: every thread's solver starts afresh (a new Z3
    // context, the axioms asserted again) at every this-many-th chunk of
    // derive_chunk candidates, so a verdict depends only on the queries
    // since the last restart, which a run resumed there asks again: what
    // lets --checkpoint resume such a run; and a solver's memory stays
    // bounded (at N=5 Z3's grew by ~1 GiB every 160,000 candidates without
    // restarts, and stays near 50 MiB with them: docs/generator.md,
    // "Memory at N=5"). 0: never.
    unsigned solver_restart_chunks = 64;
    bool try_transposed = true;      // verifier::try_transposed: the transposed mirror before giving up
    // Incremental verification: before Z3, try to derive each candidate from
    // the rules proven so far (candidates in increasing size, in chunks).
    bool derive = true;
    int derive_depth = 2;            // rewrites per side
    // The last derivation pass, over the candidates Z3 did not prove (a few
    // dozen at N=3): deeper, since a distributivity, an identity and a
    // commutativity on one side take three rewrites.
    int final_derive_depth = 4;
    std::size_t final_derive_limit = 128;  // candidates that get it (the rest: derive_depth)
    // Derive the Z3 non-proofs again, each chunk's with the rules its own
    // proofs added and, last, every one against the whole rule base (the
    // final pass). Only Z3-proven rules are emitted and join the rule base,
    // so these passes change no rule: they tell which non-proofs are
    // derivable all the same (listed "derived" instead of unproven). At N=5
    // the final pass alone was 28 % of the derivation's thread time and
    // derived 1 % of what it tried (docs/generator.md, "N=5 decided in one
    // run"); tsopt-gen --no-rederive skips them.
    bool rederive = true;
    // Rule applications one derivation may preview (both sides, each shape
    // configuration apart) before it gives up and the candidate goes to Z3
    // (0: no cap). Failed derivations are most of the derivation's time at
    // N=4 and N=5, but mostly short ones: a cap of 1,024 rarely binds, 256
    // decides ~5 % more N=5 candidates in a fixed time (docs/generator.md,
    // "N=5 decided in one run"); a count, not a time, so the rules stay
    // reproducible.
    std::size_t derive_effort = 0;
    // Candidates verified together (in parallel) before their proven rules join
    // the rule base; fixed, so the result does not depend on --threads.
    unsigned derive_chunk = 16;
    // With a team: graphs each process sends per round of the shuffle to
    // the fingerprints' owners (shuffle_to_owners). Only memory depends on
    // it: a round's bytes are ~250 per graph at N=5, built, sent and read
    // before the next round's.
    std::size_t shuffle_batch = 1'000'000;
    // Also emit derived rules, into the listing and the header (default:
    // counted, listed in the summary, not emitted). Each names the proven
    // rules it was derived from.
    bool emit_derived = false;
    // Keep the named rules the run does not emit (run_result::derived_rules
    // and not_proven) for inspection. tsopt-gen does not: at N=5 they are
    // millions of rules of ~2 KB each (docs/generator.md, "Memory at N=5"); it
    // counts them, and lists the unproven ones as text (--unproven).
    bool keep_unemitted = true;
    bool settle_opaque = true;       // opaque_constants_refute before Z3
    // Replace the proven instances of a rule by one rule over parameter
    // variables where Z3 proves it (generalization_groups), within the same
    // limits as every query.
    bool generalize = true;
    // Emit, for a proven rule whose source reads one tensor in several
    // places, the first variant with a variable per read that agrees on
    // random inputs and that Z3 proves (plan_operand_splits), before
    // generalize; it replaces the rule unless it copied a shared node.
    bool split_operands = true;
    double budget_s = 0;             // overall verification budget (0: none); the rest counts as not verified
    // The verification's outcomes so far, rewritten atomically at a chunk's
    // end every checkpoint_every_s seconds and after the last chunk; a run
    // given an existing file resumes after the chunks it holds, if it was
    // written for the same spec, options and candidates (an error otherwise).
    std::string checkpoint;
    double checkpoint_every_s = 60;
    std::string header_out, listing_out, summary_out, unproven_out;
    std::string header_namespace = "tsopt::rules";  // --namespace
    // One line per verified candidate: verdict, seconds, Z3 rlimit spent, rule
    // (tab-separated; the data --rlimit is calibrated from, docs/generator.md).
    std::string query_log_out;
    bool quiet = false;
};
struct phase_stat {
    std::string name;
    double seconds = 0;
    std::uint64_t peak_kib = 0;  // VmHWM during the phase (reset per phase where the kernel allows)
};
struct run_result {
    pipeline_stats st;
    std::vector<phase_stat> phases;
    std::uint64_t proven = 0, unproven = 0, timeouts = 0, skipped = 0;  // skipped: not verified (--no-verify or budget)
    std::uint64_t derived = 0;   // derived from proven rules (no Z3 query); counted apart from `proven` (Z3)
    std::uint64_t settled = 0;   // of `unproven`: refuted before Z3 (opaque constants)
    std::uint64_t z3_queries = 0;
    std::uint64_t max_z3_memory_mb = 0;  // Z3's "max memory" over the queries (process-wide peak)
    std::vector<emitted_rule> derived_rules;  // named derived candidates (emitted only with emit_derived)
    // Their count (not emitted, equal texts once), kept or not (keep_unemitted).
    std::uint64_t derived_rules_not_emitted = 0;
    std::vector<std::string> unproven_listing;  // "verdict: NAME: src => dst  (detail)"; never emitted as rules
    std::vector<emitted_rule> rules;      // Z3-proven: the header and rules.txt
    // Proven rules left out because their source is a multi-output pattern
    // whose outputs share no tensor or node (source_connected).
    std::uint64_t disconnected_sources = 0;
    // Proven rules left out as equal to an emitted one up to the operand
    // order of commutative operators, or as only reordering operands
    // (commutative_form).
    std::uint64_t commutative_duplicates = 0, commutation_only = 0;
    std::vector<emitted_rule> commutative_left_out;  // those rules (derived rules may name them as sources; kept with keep_unemitted)
    // Proven rules left out as an emitted rule with outputs it leaves
    // unchanged added (changed_outputs_only).
    std::uint64_t unchanged_outputs = 0;
    std::vector<emitted_rule> unchanged_outputs_left_out;  // those rules (derived rules may name them as sources; kept with keep_unemitted)
    // Proven rules left out as dead ends for the search (cost_raising_dead_ends).
    std::uint64_t cost_raising_dead_ends = 0;
    std::vector<emitted_rule> dead_ends_left_out;  // those rules (derived rules may name them as sources; kept with keep_unemitted)
    // Rules over parameter variables emitted, the proven instances they
    // replaced, and generalizations Z3 did not prove (their instances stay).
    std::uint64_t generalized_rules = 0, generalized_instances = 0, generalize_unproven = 0;
    // Rules with shared operands split emitted, the rules they replaced (the
    // rest stay beside a variant that copied a shared node),
    // variants Z3 did not prove, and variants that differed on random inputs
    // (never sent to Z3).
    std::uint64_t split_rules = 0, split_instances = 0, split_unproven = 0, split_refuted = 0;
    std::vector<emitted_rule> split_left_out;  // the rules replaced (derived rules may name them as sources; kept with keep_unemitted)
    std::vector<emitted_rule> not_proven; // named candidates that were not proven (inspection only)
    std::uint64_t not_proven_rules = 0;   // their count, kept or not (keep_unemitted)
    double max_proof_seconds = 0;         // slowest successful proof
    // Proofs that spent over half the rlimit (without an rlimit: over half
    // the time limit): the ones a lower limit would lose.
    std::uint64_t near_limit = 0;
    std::uint64_t max_proof_rlimit = 0;   // most Z3 resources a successful proof spent
    std::uint64_t rlimit = 0;             // the per-query rlimit of the run (0: none)
    std::uint64_t proven_transposed = 0;  // of `proven`: through the transposed mirror (verifier::try_transposed)
    std::uint64_t derived_after_z3 = 0;   // of `derived`: after their Z3 query failed, from their chunk's proofs
    // Thread time of the verification's parts: where a run's time goes.
    double derive_seconds = 0, derive_failed_seconds = 0;  // all derivation attempts; those that failed
    std::uint64_t derive_capped = 0;  // derivation attempts given up at derive_effort (this run's, resumed work not counted)
    double z3_proof_seconds = 0, z3_other_seconds = 0;     // Z3 queries that proved; the rest
    // With a team: each process's seconds of verification work (its share of
    // the passes, not the waits in exchanges), in rank order.
    std::vector<double> rank_seconds;
    std::vector<double> rank_enumerate_seconds;  // each process's walk of its subtrees
    // Each process's shuffle of its graphs to their fingerprints' owners:
    // seconds (waits for the others included), bytes sent to the others.
    std::vector<double> rank_shuffle_seconds;
    std::vector<std::uint64_t> rank_shuffle_bytes;
    std::vector<std::uint64_t> rank_peak_kib;  // each process's peak resident memory over the run's phases
    // Each process's candidates in the chunks' first pass (derivation),
    // drawn from the team's counter: the slower a process, the fewer.
    std::vector<std::uint64_t> rank_first_pass;
    std::uint64_t resumed = 0;  // candidates whose outcomes came from the checkpoint
    bool resumed_final_pass = false;  // the final derivation pass's outcomes came from the checkpoint
    std::uint64_t resumed_final_positions = 0;  // of the final derivation pass's list, those the checkpoint held
    unsigned resumed_partitions = 0;  // fingerprint partitions whose candidates came from the checkpoint
    std::string spec_hash;
    bool verified = false;
    std::string summary_json() const;
    void write_summary_json(const text_sink& out) const;
    std::string summary_text() const;
};
bool verifier_available();
run_result run(const run_config& c);

// Whether a rule's source is one connected pattern: its nodes linked through
// the tensor variables and nodes they read. A multi-output source whose
// outputs share nothing ((relu ?x), (relu ?y)) matches every pair of such
// operators in a model, quadratically many, and is no local rewrite; TASO's
// multi-output rules all fuse operators that share an input. The generator
// proves such rules (they help derive others) but does not emit them.
bool source_connected(const io::listed_rule& r);

// The rule's two sides written with the operands of every commutative
// operator (spec::op_decl::commutative) in a fixed order, under the renaming
// of the variables that writes them least: rules with equal keys match the
// same graphs and build the same ones up to operand order, since the matcher
// binds a commutative node in both orders and a renaming of a rule's
// variables is the same rule. tsopt-gen emits one rule per key and none whose
// two sides are equal under it (`?x + ?y => ?y + ?x`): pruning that only the
// matcher's commutativity makes safe.
struct commutative_key {
    std::string src, dst;
    friend auto operator<=>(const commutative_key&, const commutative_key&) = default;
};
commutative_key commutative_form(const io::listed_rule& r);

// A multi-output rule some of whose outputs it leaves as they were (the same
// expression on both sides, commutative_form's texts) restates the rule of
// its other outputs in a context: wherever it matches, that rule matches
// too and builds the same graph up to operand order. This is that rule,
// canonical; nullopt when every output or none changes, or when the outputs
// that change read a variable only an unchanged one binds. tsopt-gen leaves
// such a rule out where the rule of its changed outputs is emitted
// (`unchanged_outputs` in the summary).
std::optional<io::listed_rule> changed_outputs_only(const io::listed_rule& r);

// Issue #19's pruning, part 5, second half: rules that only ever raise the
// cost and enable nothing. A rule whose target is its source with operators
// added (every source operator still there, reading the same values: the
// nodes' expressions, commutative_form's, are a sub-multiset) never lowers
// a cost tsopt has: cost::sum and the measured costs add a non-negative time
// per operator, cost::critical_path is monotone (adding an operator never
// shortens a path), and operators on weights alone are folded (cost 0).
bool only_adds_operators(const io::listed_rule& r);
// Whether `other`'s source might match a graph over an operator that `r`'s
// target adds (the only way applying `r` makes a match no graph had before;
// an over-estimate: it unifies each source node's pattern with each added
// node's expression, variables standing for anything, the context above
// left open).
bool may_enable(const io::listed_rule& r, const io::listed_rule& other);
// Which rules are dead ends for a search: they only add operators and may
// enable no rule but themselves, their reverse (which only undoes them) and
// other dead ends (a fixpoint). tsopt-gen leaves them out of the emitted
// set (`cost_raising_dead_ends` in the summary).
std::vector<bool> cost_raising_dead_ends(std::span<const io::listed_rule* const> rules);

// An axiom checked on `samples` random instances (shapes, parameter values,
// tensors) under the operators' float semantics: "" when it held on every
// instance that type-checked and one did; "false: ..." when an instance
// tells the sides apart; "not sampled: ..." when it could not be checked.
std::string sample_axiom(const spec::axiom& a, int samples = 256, std::uint64_t seed = 1);

// tsopt-gen's command line: parses argv, runs, prints the summary; returns
// the exit status. An engine's own generator registers its operators and
// axioms (spec::register_operator, spec::register_axioms) and calls it.
int cli_main(int argc, char** argv);

}  // namespace tsopt::gen
