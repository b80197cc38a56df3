// tsopt-gen's command line (main.cpp; docs/generator.md; `tsopt-gen --help`
// for the options), a library function so that an engine's own generator
// can register its operators and axioms and then run the same command
// (docs/install.md, "Your own operators").
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gen.hpp"
#include "tsopt/spec/axioms.hpp"
#ifdef TSOPT_GEN_MPI
#include "mpi/mpi_team.hpp"
#endif

namespace {

#ifdef TSOPT_GEN_MPI
tsopt::gen::mpi_team* team = nullptr;
#endif

const char* usage =
    "usage: tsopt-gen [options]\n"
    "Enumerates operator graphs, finds equivalent pairs by fingerprint, confirms them on\n"
    "random inputs, prunes redundant ones, proves the rest with Z3 and emits the rules.\n"
    "\n"
    "  --max-ops N        largest graph size in operators (1..6, default 4)\n"
    "  --ops a,b,...      operators to enumerate (default: every generated operator)\n"
    "  --max-outputs N    most outputs a graph may have (1..4, default 2)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --header FILE      write the constexpr rule header (generated_rules.hpp)\n"
    "  --namespace NS     the header's namespace (default tsopt::rules): another one, e.g.\n"
    "                     myengine::rules, lets an engine's own set live beside the shipped one\n"
    "  --listing FILE     write the plain-text rule listing (rules.txt)\n"
    "  --summary FILE     write the run summary as JSON (counts, phases, every candidate not proven)\n"
    "  --query-log FILE   write one line per Z3 query: verdict, seconds, Z3 resources spent, rule\n"
    "  --unproven FILE    write the candidates that were not proven, commented out (inspection only)\n"
    "  --no-verify        skip Z3: no rule is emitted (header and listing stay empty),\n"
    "                     candidates go to --summary / --unproven only\n"
    "  --rlimit N         Z3 deterministic resource limit per query (0: none; default 500000, the\n"
    "                     build's): proof outcomes depend on the inputs and options only\n"
    "  --max-instances N  Z3 quantifier instantiations per query (0: no cap; default 10000); bounds\n"
    "                     deterministically the queries whose E-matching explodes below the rlimit\n"
    "  --timeout-ms N     wall-clock hang guard per Z3 query (default 60000): a query it ends aborts\n"
    "                     the run with the error 'wall-clock guard' (exit 1, no rules written), since\n"
    "                     its verdict would depend on machine load\n"
    "  --no-derive        send every candidate to Z3 (default: first try to derive it from the rules\n"
    "                     proven so far: its two sides joinable within --derive-depth rewrites each)\n"
    "  --derive-depth N   rewrites per side when deriving a candidate (0..4, default 2)\n"
    "  --final-derive-depth N\n"
    "                     rewrites per side in the last derivation pass, over the candidates Z3 did\n"
    "                     not prove, against every proven rule (0..6, default 4)\n"
    "  --final-derive-limit N\n"
    "                     how many of those candidates (the first, in order) get that depth; the\n"
    "                     rest get --derive-depth (0..1000000, default 128)\n"
    "  --no-rederive      skip the derivations after Z3 (each chunk's, over its Z3 non-proofs, and\n"
    "                     the final pass): the same rules, in less time; those candidates stay\n"
    "                     listed as not proven, though some are derivable\n"
    "  --derive-effort N  rule applications one derivation may try (both sides; 0..1000000000,\n"
    "                     default 0: no cap) before the candidate goes to Z3 instead: a count, so\n"
    "                     the rules stay reproducible; they depend on N\n"
    "  --derive-chunk N   candidates verified between two updates of the proven rules (1..4096,\n"
    "                     default 16): larger balances the threads better, derives a little less\n"
    "  --shuffle-batch N  tsopt-gen-mpi: graphs each rank sends per round of the exchange that\n"
    "                     brings every graph to the rank owning its fingerprint (1..1000000000,\n"
    "                     default 1000000; memory only: the rules do not depend on it)\n"
    "  --emit-derived     also emit the derived rules into --listing and --header, each naming the\n"
    "                     Z3-proven rules it was derived from (default: counted in --summary only)\n"
    "  --no-settle        send candidates with constants no axiom reaches to Z3 too (default: settled\n"
    "                     as not provable when they differ with a random tensor in the constant's place)\n"
    "  --no-generalize    emit every proven instance as enumerated (default: a rule using one value of\n"
    "                     a stride, dilation or padding slot throughout is proven\n"
    "                     once with a parameter variable there and replaces its instances)\n"
    "  --no-split-operands  emit a rule whose source reads one tensor in several places as enumerated\n"
    "                     (default: the first variant with a variable per read that agrees on random\n"
    "                     inputs and that Z3 proves is emitted, replacing it unless it copied a node)\n"
    "  --no-mbqi          turn off Z3's model-based quantifier instantiation\n"
    "  --no-transposed    give up on a matrix candidate Z3 does not prove (default: try its transposed\n"
    "                     mirror, matmul's operands swapped, and step back from it; docs/generator.md)\n"
    "  --reuse-solver     one Z3 solver per thread, axioms asserted and preprocessed once (most of\n"
    "                     a typical proof's cost with a fresh solver);\n"
    "                     queries are dealt to threads by position: the rules are reproducible\n"
    "                     for a given --threads, not across thread counts\n"
    "  --solver-restart N under --reuse-solver, every thread's solver starts afresh every N chunks\n"
    "                     of --derive-chunk candidates (0..1000000, default 64; 0: never): a verdict\n"
    "                     then depends only on the queries since the last restart, which --checkpoint\n"
    "                     needs to resume such a run, and Z3's memory stays bounded; the rules\n"
    "                     depend on N\n"
    "  --checkpoint FILE  keep the verification's outcomes in FILE (rewritten atomically at a\n"
    "                     chunk's end, every --checkpoint-every-s); a run given an existing FILE\n"
    "                     resumes after the chunks (and slices of the final derivation pass) it\n"
    "                     holds and ends with the same rules (it must come from the same spec,\n"
    "                     options and candidates: an error otherwise);\n"
    "                     the candidates of each paired fingerprint partition go to\n"
    "                     FILE.candidates, which a resumed run reads instead of enumerating\n"
    "                     (with --reuse-solver: written only at the chunks where the solvers\n"
    "                     restart, so not with --solver-restart 0)\n"
    "  --checkpoint-every-s S\n"
    "                     seconds between checkpoint writes (0..86400, default 60)\n"
    "  --budget-s S       overall verification budget in seconds (default: none); candidates\n"
    "                     not attempted in time are counted as not verified (which ones depends\n"
    "                     on machine load: the listing's header says a budget was set); past it\n"
    "                     the derivation passes after Z3 stop too (a Z3 non-proof stays one)\n"
    "  --single-shape     fingerprint on one shape configuration only (more shape-coincidence candidates)\n"
    "  --representative-params\n"
    "                     one value per structural parameter (stride 1, same padding, concat axis\n"
    "                     0/1) as TASO enumerated: rules hold for those values only\n"
    "  --distinct-operands\n"
    "                     binary operators never read one tensor twice (TASO's discipline)\n"
    "  --distinct-values  no operator reads a tensor whose value another tensor of the graph already\n"
    "                     has (a detour a smaller rule removes; detours ending in an output are kept)\n"
    "  --all-pairs-limit N\n"
    "                     fingerprint buckets of more than N graphs pair each graph with the smallest\n"
    "                     one equal to it only, not every two (default 256; 1: always)\n"
    "  --partitions K     enumerate K times, each time keeping the graphs of one fingerprint range\n"
    "                     only: 1/K of the graph store in memory at K times the DFS (N=5;\n"
    "                     same candidates and rules, default 1)\n"
    "  --inputs x,w,...   enumerate over these of the default inputs only (default: all of\n"
    "                     x, y [1,4,6,8], w, v [4,4,3,3], u [4,4,1,1], a, b, c [4,4], s [1])\n"
    "  --seed N           seed of the random test inputs\n"
    "  --quiet            no progress or summary on stderr\n"
    "  --help             this text\n";

[[noreturn]] void die(const std::string& msg) {
#ifdef TSOPT_GEN_MPI
    // Every rank parses the same command line: rank 0 speaks for them all.
    if (!team || team->rank() == 0) std::fprintf(stderr, "tsopt-gen: %s\n", msg.c_str());
    if (team && team->size() > 1) team->abort_all(2);
#else
    std::fprintf(stderr, "tsopt-gen: %s\n", msg.c_str());
#endif
    std::exit(2);
}

// An integer option's value rule: base 10 (strtol's reading: leading blanks
// and a sign allowed), within lo..hi; the message names the option.
CLI::Validator int_within(long lo, long hi) {
    return CLI::Validator(
        [lo, hi](std::string& v) -> std::string {
            char* end = nullptr;
            errno = 0;
            long x = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || errno == ERANGE) return "expects an integer, got '" + v + "'";
            if (x < lo || x > hi) return "must be within " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + v;
            v = std::to_string(x);  // CLI11's own conversion reads a leading 0 as octal
            return {};
        },
        "N");
}

void check_writable(const std::string& opt, const std::string& path) {
    namespace fs = std::filesystem;
    bool existed = fs::exists(path);
    {
        std::ofstream f(path, std::ios::app);
        if (!f) die(opt + ": cannot write '" + path + "'");
    }
    if (!existed) fs::remove(path);
}

std::vector<std::string> comma_list(const std::string& list) {
    std::vector<std::string> out;
    std::size_t b = 0;
    while (b <= list.size()) {
        auto e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        out.push_back(list.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

std::vector<tsopt::spec::op_kind> select_ops(const std::string& list) {
    using namespace tsopt;
    std::vector<spec::op_kind> out;
    for (const auto& n : comma_list(list)) {
        auto k = spec::find_op(n);
        if (!k) {
            std::string known;
            for (const auto* d : spec::all_operators())
                if (d->generated) known += (known.empty() ? "" : ", ") + std::string(d->name);
            die("--ops: unknown operator '" + n + "' (generated operators: " + known + ")");
        }
        if (!spec::decl(*k).generated) die("--ops: operator '" + n + "' is not enumerated by the generator");
        if (spec::decl(*k).min_inputs > 2) die("--ops: operator '" + n + "' takes more than two inputs; the generator enumerates up to two");
        out.push_back(*k);
    }
    return out;
}

// A subset of the default inputs, kept in their default order so that
// tensor ids (and rule texts) do not depend on how the list was written.
std::vector<tsopt::gen::input_decl> select_inputs(const std::string& list) {
    auto all = tsopt::gen::default_inputs();
    std::vector<bool> chosen(all.size(), false);
    for (const auto& n : comma_list(list)) {
        std::size_t i = 0;
        while (i < all.size() && all[i].name != n) ++i;
        if (i == all.size()) {
            std::string known;
            for (const auto& d : all) known += (known.empty() ? "" : ", ") + d.name;
            die("--inputs: unknown input '" + n + "' (inputs: " + known + ")");
        }
        if (chosen[i]) die("--inputs: input '" + n + "' named twice");
        chosen[i] = true;
    }
    std::vector<tsopt::gen::input_decl> out;
    for (std::size_t i = 0; i < all.size(); ++i)
        if (chosen[i]) out.push_back(all[i]);
    return out;
}

}  // namespace

int tsopt::gen::cli_main(int argc, char** argv) {
    using namespace tsopt;
    gen::run_config c;
    c.keep_unemitted = false;  // counted and listed as text; not kept as rules
#ifdef TSOPT_GEN_MPI
    std::optional<gen::mpi_team> mpi;
    try {
        mpi.emplace(&argc, &argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tsopt-gen-mpi: %s\n", e.what());
        return 1;
    }
    team = &*mpi;
    c.team = team;
    const bool speaks = team->rank() == 0;  // progress, summary, errors every rank shares
    c.o.threads = 1;                        // a rank per core unless --threads says otherwise
#else
    const bool speaks = true;
#endif
    for (const auto* d : spec::all_operators())
        if (d->generated && d->min_inputs <= 2) c.o.ops.push_back(d->kind);
    // Every option once at most is not enforced: a later one wins.
    CLI::App app("tsopt-gen");
    app.set_help_flag();  // --help prints `usage` (on rank 0 only)
    app.allow_extras();   // reported below as unknown options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();
    bool help = false, no_verify = false, no_mbqi = false, no_generalize = false, no_split_operands = false, no_transposed = false, no_derive = false,
         no_settle = false, single_shape = false, no_rederive = false;
    std::string ops, inputs;
    app.add_flag("-h,--help", help);
    app.add_option("--max-ops", c.o.max_ops)->check(int_within(1, gen::max_graph_ops));
    app.add_option("--max-outputs", c.o.max_outputs)->check(int_within(1, 4));
    app.add_option("--threads", c.o.threads)->check(int_within(1, 64));
    app.add_option("--timeout-ms", c.timeout_ms)->check(int_within(1, 3600000));
    app.add_option("--rlimit", c.rlimit)->check(int_within(0, 2000000000));
    app.add_option("--max-instances", c.max_instances)->check(int_within(0, 2000000000));
    app.add_option("--budget-s", c.budget_s)->check(int_within(0, 86400));
    app.add_option("--checkpoint", c.checkpoint);
    app.add_option("--checkpoint-every-s", c.checkpoint_every_s)->check(int_within(0, 86400));
    app.add_option("--unproven", c.unproven_out);
    app.add_option("--query-log", c.query_log_out);
    app.add_flag("--single-shape", single_shape);
    app.add_flag("--representative-params", c.o.representative_params);
    app.add_flag("--distinct-operands", c.o.distinct_operands);
    app.add_flag("--distinct-values", c.o.distinct_values);
    app.add_option("--partitions", c.o.partitions)->check(int_within(1, 1024));
    app.add_option("--all-pairs-limit", c.o.all_pairs_limit)->check(int_within(1, 1L << 30));
    app.add_option("--seed", c.o.seed)->check(int_within(0, 1L << 62));
    app.add_option("--header", c.header_out);
    app.add_option("--listing", c.listing_out);
    app.add_option("--namespace", c.header_namespace);
    app.add_option("--summary", c.summary_out);
    app.add_flag("--no-verify", no_verify);
    app.add_flag("--no-mbqi", no_mbqi);
    app.add_flag("--no-generalize", no_generalize);
    app.add_flag("--no-split-operands", no_split_operands);
    app.add_flag("--reuse-solver", c.reuse_solver);
    app.add_option("--solver-restart", c.solver_restart_chunks)->check(int_within(0, 1000000));
    app.add_flag("--no-transposed", no_transposed);
    app.add_flag("--no-derive", no_derive);
    app.add_option("--derive-depth", c.derive_depth)->check(int_within(0, 4));
    app.add_option("--final-derive-depth", c.final_derive_depth)->check(int_within(0, 6));
    app.add_option("--final-derive-limit", c.final_derive_limit)->check(int_within(0, 1000000));
    app.add_option("--derive-effort", c.derive_effort)->check(int_within(0, 1000000000));
    app.add_option("--derive-chunk", c.derive_chunk)->check(int_within(1, 4096));
    app.add_option("--shuffle-batch", c.shuffle_batch)->check(int_within(1, 1000000000));
    app.add_flag("--no-rederive", no_rederive);
    app.add_flag("--emit-derived", c.emit_derived);
    app.add_flag("--no-settle", no_settle);
    app.add_flag("--quiet", c.quiet);
    app.add_option("--inputs", inputs);
    app.add_option("--ops", ops);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ValidationError& e) {
        // CLI11 says "--max-ops: must be within ...": "--max-ops must be within ..." as before.
        std::string what = e.what();
        if (auto colon = what.find(": "); colon != std::string::npos) what.erase(colon, 1);
        die(what);
    } catch (const CLI::ArgumentMismatch& e) {
        // "NAME: 1 required N missing", or a flag given a value.
        const std::string what = e.what();
        std::string name = what.substr(0, what.find_first_of(": "));
        if (what.find("flag override") != std::string::npos)
            die((name.starts_with("-") ? name : "--" + name) + " takes no value");
        die(name + " needs a value");
    } catch (const CLI::ParseError& e) {
        die(e.what());
    }
    if (help) {
        if (speaks) std::fputs(usage, stdout);
        return 0;
    }
    if (auto rest = app.remaining(); !rest.empty()) die("unknown option '" + rest.front() + "' (see --help)");
    // An engine's axioms (spec::register_axioms) are sampled before they
    // can prove anything: a false one would make Z3 prove false rules.
    for (const spec::axiom& a : spec::extension_axioms()) {
        const std::string verdict = gen::sample_axiom(a);
        if (verdict.starts_with("false")) die("axiom '" + std::string(a.name) + "' is " + verdict);
        if (!verdict.empty() && speaks && !c.quiet)
            std::fprintf(stderr, "tsopt-gen: axiom '%s' %s\n", std::string(a.name).c_str(), verdict.c_str());
    }
    if (no_verify) c.verify = false;
    if (no_mbqi) c.mbqi = false;
    if (no_generalize) c.generalize = false;
    if (no_split_operands) c.split_operands = false;
    if (no_transposed) c.try_transposed = false;
    if (no_derive) c.derive = false;
    if (no_rederive) c.rederive = false;
    if (no_settle) c.settle_opaque = false;
    if (single_shape) c.o.two_shapes = false;
    if (app.count("--namespace") && !tsopt::gen::valid_namespace(c.header_namespace))
        die("--namespace: '" + c.header_namespace + "' is not a C++ namespace name (identifiers joined by ::)");
    if (app.count("--inputs")) c.o.inputs = select_inputs(inputs);
    if (app.count("--ops")) c.o.ops = select_ops(ops);
    if (app.count("--solver-restart") && !c.reuse_solver) die("--solver-restart: only with --reuse-solver");
    // A reused solver's verdicts depend on the queries it answered before,
    // which a resumed run has not asked unless the solvers restart where it
    // resumes.
    if (!c.checkpoint.empty() && c.reuse_solver && !c.solver_restart_chunks)
        die("--checkpoint with --reuse-solver: a resumed run's solvers have not answered the earlier queries, so its "
            "verdicts could differ from an uninterrupted run's unless the solvers restart where it resumes: drop "
            "--solver-restart 0 (the solvers then start afresh every 64 chunks), or checkpoint without --reuse-solver");
    if (speaks) {
        for (auto* p : {&c.header_out, &c.listing_out, &c.summary_out, &c.unproven_out, &c.query_log_out, &c.checkpoint})
            if (!p->empty()) check_writable("output", *p);
    } else
        c.quiet = true;
    try {
        auto r = gen::run(c);
        if (!c.quiet) std::fputs(r.summary_text().c_str(), stderr);
    } catch (const gen::team_error& e) {  // raised by every rank at once
        if (speaks) std::fprintf(stderr, "tsopt-gen: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tsopt-gen: %s\n", e.what());
#ifdef TSOPT_GEN_MPI
        if (team->size() > 1) team->abort_all(1);  // the other ranks would wait for this one
#endif
        return 1;
    }
    return 0;
}
