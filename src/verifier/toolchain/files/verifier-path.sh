# termgrade's offline verifier toolchain: read by bash through BASH_ENV when test.sh's pip installs
# are served, it puts the toolchain's pip, pip3, uv and pytest first on the verifier's PATH.
case ":$PATH:" in
  *:/opt/termgrade-verifier/shims:*) ;;
  *) PATH="/opt/termgrade-verifier/shims:$PATH"; export PATH ;;
esac
