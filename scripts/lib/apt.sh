# apt_install_missing PKG...: installs from Debian those of PKG that are not
# installed (as root, or with sudo), logging through the caller's log
# function; says which are already present. Sourced by install-data.sh and
# setup-notebooks.sh.
apt_install_missing() {
	local missing=() p sudo=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		log "Debian packages present: $*"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { log "need root (or sudo) to install ${missing[*]}"; return 1; }
		sudo=sudo
	fi
	log "installing ${missing[*]} from Debian"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
