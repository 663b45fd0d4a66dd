#!/usr/bin/env bash
# The release's signature over SHA256SUMS (docs/release.md#verifying-a-release): an SSH signature, which
# needs nothing beyond OpenSSH's ssh-keygen on either side.
#
#   hack/lib/release-signature.sh sign DIR                     DIR/SHA256SUMS -> DIR/SHA256SUMS.sig, with the
#                                                              private key file $TRAINOP_RELEASE_SIGNING_KEY
#   hack/lib/release-signature.sh verify DIR ALLOWED_SIGNERS   the signature is by a key of ALLOWED_SIGNERS
#                                                              (ssh-keygen's allowed_signers format, principal
#                                                              release@trainop), then `sha256sum -c` in DIR
#
# The namespace (ssh-keygen -n) binds a signature to this use: one made for git or a login cannot pass.
set -euo pipefail
NAMESPACE="trainop-release"
PRINCIPAL="release@trainop"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; }

case "${1:-}" in
  sign)
    [ $# -eq 2 ] || { usage; exit 2; }
    key="${TRAINOP_RELEASE_SIGNING_KEY:-}"
    [ -n "$key" ] || { echo "TRAINOP_RELEASE_SIGNING_KEY is not set: the path of the SSH private key that signs releases" >&2; exit 2; }
    [ -r "$key" ] || { echo "TRAINOP_RELEASE_SIGNING_KEY=$key is not a readable file" >&2; exit 2; }
    [ -f "$2/SHA256SUMS" ] || { echo "$2/SHA256SUMS is missing" >&2; exit 1; }
    rm -f "$2/SHA256SUMS.sig"
    ssh-keygen -q -Y sign -f "$key" -n "$NAMESPACE" "$2/SHA256SUMS"
    ;;
  verify)
    [ $# -eq 3 ] || { usage; exit 2; }
    ssh-keygen -Y verify -f "$3" -I "$PRINCIPAL" -n "$NAMESPACE" -s "$2/SHA256SUMS.sig" <"$2/SHA256SUMS" >&2
    (cd "$2" && sha256sum --quiet -c SHA256SUMS)
    ;;
  -h|--help) usage ;;
  *) usage; exit 2 ;;
esac
