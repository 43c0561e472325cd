#pragma once
// Only for the SimGrid SMPI build (SPARSGD_SMPI), where CMake includes it first in every source
// file of the command. smpicxx force-includes smpi_helpers.h, which defines exit(x) as a macro (so
// that a rank calling exit() ends only itself, not the simulator); that macro also rewrites
// CLI11's member function App::exit(error, out, err), which then fails to compile. sparsgd never
// calls exit(), so the macro can go.
#undef exit
