# Sourced by the report scripts: a result is written under a name nobody can have prepared and then
# renamed onto its target, never written through a link planted at its name or beside it.
#   staged TARGET          prints a fresh file beside TARGET, made exclusively (mktemp: O_EXCL)
#   publish STAGED TARGET  makes it TARGET (mode 0644): the rename replaces whatever TARGET was, a
#                          link included (mv -T: never into a directory a link points at)
staged() { mktemp "$(dirname "$1")/.$(basename "$1").XXXXXX"; }
publish() { chmod 644 "$1" && mv -fT "$1" "$2"; }
