# Sourced by the scripts that need Debian packages a new machine may lack:
# `apt_install PACKAGE...` installs them as root, or through sudo.
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  command -v apt-get >/dev/null 2>&1 || { echo "install $* (no apt-get on this machine)" >&2; return 1; }
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@"
}
