#pragma once
// Drawing with gnuplot so that nothing from a user or from a file is ever code, for gnuplot or for
// a shell. Three rules make that hold by construction rather than by quoting:
// - gnuplot runs without a shell, from argv, in the output directory, and every file it names is
//   a fixed name the program chose (plots.gnuplot, accuracy_vs_epoch.png, ...): no path a user
//   gave appears in a script.
// - data enters as inline data blocks of numbers this program formatted itself (never lines copied
//   from a file, which could end the block and continue as commands);
// - text (titles, labels) enters only through text_literal(), which keeps a small set of
//   characters that cannot end a single-quoted gnuplot string or start a substitution (no quote,
//   backquote, '@', '!', '\\', newline or other control character) and replaces the rest with '?'.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sparsgd/core/error.hpp"

namespace sparsgd::cli {

// A single-quoted gnuplot string literal holding `text`, with every character outside
// [A-Za-z0-9], space and . , : ; = + - _ / ( ) [ ] % # replaced by '?'.
std::string gnuplot_text_literal(std::string_view text);

// One inline data block, `$name << EOD` ... `EOD`, one row a line; a non-finite value is written
// as NaN (gnuplot skips the point). `name` must be a program constant ([A-Za-z0-9_]).
std::string gnuplot_datablock(std::string_view name, const std::vector<std::vector<double>>& rows);

// gnuplot is not on PATH: a training run then ends without plots (a warning); any other failure
// to plot is an error.
class GnuplotMissing : public Error {
 public:
  using Error::Error;
};

// Writes `script` to dir/script_name (checked), then runs `gnuplot script_name` (found on PATH,
// without a shell) with dir as its working directory and its output to dir/log_name. Throws Error
// naming the file and the reason (GnuplotMissing if gnuplot is not installed) if a write fails, gnuplot cannot be
// started, or it exits non-zero; then also checks that each of
// `expected_outputs` (names in dir) exists and is not empty.
void run_gnuplot(const std::filesystem::path& dir, const std::string& script_name, const std::string& script,
                 const std::string& log_name, const std::vector<std::string>& expected_outputs);

}  // namespace sparsgd::cli
