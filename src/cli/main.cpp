// sparsgd: gradient sparsification for data-parallel SGD on slow networks.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/torch_executable.hpp"
#include "cli/validators.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/error.hpp"
#include "sparsgd/core/stop_request.hpp"

int main(int argc, char** argv) {
#ifndef SPARSGD_HAVE_TORCH
  if (sparsgd::cli::needs_torch(argc, argv)) {
#ifdef SPARSGD_TORCH_EXECUTABLE
    return sparsgd::cli::exec_torch_executable(argv);
#else
    if (std::strcmp(argv[1], "train") == 0) return sparsgd::cli::exec_torch_executable(argv);  // says why not
#endif
  }
#endif
  CLI::App app{"sparsgd: sparse gradient exchange (gTop-k, rTop-k, Top-k) for data-parallel SGD"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sparsgd " + sparsgd::build_identity());
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: selection kernels, and compression + aggregation on P workers");
  bench->require_subcommand(1);
  sparsgd::cli::register_bench_select(*bench);
  sparsgd::cli::register_bench_comm(*bench);
  sparsgd::cli::register_simulate(app);
#ifdef SPARSGD_HAVE_TORCH
  sparsgd::cli::register_train(app);
#elif defined(SPARSGD_TORCH_EXECUTABLE)
  app.add_subcommand("train", sparsgd::cli::kTrainDescription);  // for --help: `train` runs sparsgd-torch
#endif
  sparsgd::cli::register_plot(app);
  sparsgd::cli::register_list(app);
  sparsgd::cli::require_decimal_integers(app);
  // CLI11 would only say that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) known |= command->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "sparsgd: error: unknown command '%s' (see sparsgd --help)\n", argv[1]);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
    // Results printed on stdout (--json, tables) count only if they got there: a full disk or a
    // closed pipe behind stdout is an error, not a silent exit 0.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "sparsgd: error: cannot write to standard output: %s\n", std::strerror(errno));
      return 2;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sparsgd::Interrupted& e) {
    std::fprintf(stderr, "sparsgd: %s\n", e.what());
    return 128 + e.signal();
  } catch (const sparsgd::Error& e) {
    std::fprintf(stderr, "sparsgd: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sparsgd: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsgd: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
