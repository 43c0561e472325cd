#pragma once
// Ranks that must agree check that they do, at start-up: every rank describes its configuration
// as named fields, rank 0 compares them all and tells every rank the verdict, so a mismatch fails
// at once on every rank, naming the first field that differs and the ranks that differ, instead of
// a silent wrong result or a timeout blamed on a message tag. 2 (P - 1) messages.

#include <string>
#include <utility>
#include <vector>

#include "sparsgd/transport/transport.hpp"

namespace sparsgd::collectives {

using ConfigFields = std::vector<std::pair<std::string, std::string>>;

// A number as a field's value: every bit shows (%.17g), so options that differ anywhere differ.
std::string field_value(double value);

// Collective. Throws InvalidArgument on every rank if any rank's fields differ from rank 0's
// (names, order or values), e.g. "ranks disagree on 'density': 0.01 on rank 0, 0.001 on ranks 2, 3".
// The library's build (sparsgd/core/build_info.hpp) is compared first, as the field 'sparsgd build'.
// `what` names the configuration in the message ("the DDP hook's options").
void check_ranks_agree(transport::Transport& t, const ConfigFields& fields, const std::string& what);

// Collective. Every rank returns rank 0's `text` (a value one rank decides for all, such as a
// default run directory named after rank 0's clock).
std::string broadcast_text(transport::Transport& t, const std::string& text);

}  // namespace sparsgd::collectives
