# Sourced by the hack/ scripts. Go and pyenv's Python are put on PATH by ~/.bashrc, which a
# non-interactive shell (CI runs `bash .ci/run`) never reads; add them when they exist.
for dir in /usr/local/go/bin "$HOME/go/bin" "$HOME/.pyenv/shims" "$HOME/.pyenv/bin"; do
  if [ -d "$dir" ]; then
    case ":$PATH:" in
      *":$dir:"*) ;;
      *) PATH="$dir:$PATH" ;;
    esac
  fi
done
export PATH
