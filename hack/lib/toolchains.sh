# Sourced by the hack/ scripts. Go and pyenv's Python are put on PATH by ~/.bashrc, which a
# non-interactive shell (CI runs `bash .ci/run`) never reads; add them when they exist. The sbin
# directories too, at the end: a CI shell may have only /usr/bin:/bin, and the real-node tier's
# iptables (which kube-proxy and the kubelet also call) lives in /usr/sbin.
for dir in /usr/local/go/bin "$HOME/go/bin" "$HOME/.pyenv/shims" "$HOME/.pyenv/bin"; do
  if [ -d "$dir" ]; then
    case ":$PATH:" in
      *":$dir:"*) ;;
      *) PATH="$dir:$PATH" ;;
    esac
  fi
done
for dir in /usr/local/sbin /usr/sbin /sbin; do
  case ":$PATH:" in
    *":$dir:"*) ;;
    *) PATH="$PATH:$dir" ;;
  esac
done
export PATH
