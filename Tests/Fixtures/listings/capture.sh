#!/usr/bin/env bash
# Regenerates the directory-listing fixtures in this folder from real web servers.
# Runs as root on Debian 12. Installs what is missing, builds the tree at
# /tmp/fixtree/pub, serves it from each server on 127.0.0.1, captures every
# directory listing with curl, checks that file URLs work, stops the servers.
# The webdav-* folders hold the answers of three WebDAV servers to a body-less
# PROPFIND with Depth: 1; their write check (MKCOL, PUT) runs on copies of the
# tree served by second instances. wsgidav lives in a venv at /tmp/wsgidav-venv.
# Scratch files (configs, logs, pids, tree copies) go to /tmp/ferry-capture.
set -euo pipefail
umask 022
export TZ=UTC LC_ALL=C.UTF-8

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

OUT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TREE=/tmp/fixtree
WORK=/tmp/ferry-capture
PY=/usr/bin/python3
MTIME='2026-11-27 10:00:00 UTC'

declare -A PORT=(
  [nginx-html]=18081 [nginx-json]=18082 [apache]=18083 [lighttpd]=18084
  [caddy]=18085 [python]=18086 [rclone]=18087
)
SERVERS=(nginx-html nginx-json apache lighttpd caddy python rclone)
declare -A DAV_PORT=( [webdav-rclone]=18088 [webdav-wsgidav]=18089 [webdav-apache]=18090 )
# second instances on a copy of the tree, for MKCOL and PUT
declare -A SCRATCH_PORT=( [webdav-rclone]=18091 [webdav-wsgidav]=18092 [webdav-apache]=18093 )
DAV_SERVERS=(webdav-rclone webdav-wsgidav webdav-apache)
VENV=/tmp/wsgidav-venv
WSGIDAV_PKGS=(wsgidav==4.4.0 cheroot==11.1.2)   # the versions the fixtures were made with
PATHS=(
  "/pub/" "/pub/a%20b/" "/pub/a%20b/caf%C3%A9/" "/pub/deep/" "/pub/deep/l1/"
  "/pub/deep/l1/l2/" "/pub/deep/l1/empty/" "/pub/sizes/"
  "/pub/a%20b/back/"   # symlink to .. : listed once, not walked deeper
)

# ---------------------------------------------------------------- install
# Debian services that a fresh install may start on port 80 are stopped and
# disabled again (only for packages this script installed).
missing=()
for pkg in nginx apache2 lighttpd caddy rclone curl python3 python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
# nginx-light etc. also provide /usr/sbin/nginx
if [[ " ${missing[*]} " == *" nginx "* ]] && command -v nginx >/dev/null; then
  missing=("${missing[@]/nginx}")
fi
pkgs=(); for p in "${missing[@]}"; do [ -n "$p" ] && pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing: ${pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  for pkg in "${pkgs[@]}"; do
    case "$pkg" in
      nginx|lighttpd|caddy) svcs=("$pkg") ;;
      apache2) svcs=(apache2 apache-htcacheclean) ;;
      *) continue ;;
    esac
    for svc in "${svcs[@]}"; do
    service "$svc" stop >/dev/null 2>&1 || true
    if command -v systemctl >/dev/null; then systemctl disable "$svc" >/dev/null 2>&1 || true; fi
    update-rc.d "$svc" disable >/dev/null 2>&1 || true
    done
  done
fi
[ -x "$VENV/bin/pip" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "${WSGIDAV_PKGS[@]}"

# ---------------------------------------------------------------- tree
rm -rf "$TREE"
P="$TREE/pub"
CAFE=$'caf\xc3\xa9'                          # café (NFC)
NAIVE=$'na\xc3\xafve r\xc3\xa9sum\xc3\xa9.txt'   # naïve résumé.txt (NFC)
LONG="long-$(printf 'n%.0s' $(seq 111)).txt"   # 120 characters
mkdir -p "$P/a b/$CAFE" "$P/deep/l1/l2" "$P/deep/l1/empty" "$P/sizes"
echo top    > "$P/top.txt"
echo inner  > "$P/a b/inner file.txt"
echo naive  > "$P/a b/$CAFE/$NAIVE"
echo fifty  > "$P/50% off.txt"
echo amp    > "$P/x&y#z?.txt"
echo deep   > "$P/deep/l1/l2/l3.txt"
echo long   > "$P/$LONG"
ln -s .. "$P/a b/back"
: > "$P/sizes/zero.bin"
head -c 1000    /dev/zero > "$P/sizes/k.bin"
head -c 5000000 /dev/zero > "$P/sizes/big.bin"
[ ${#LONG} -eq 120 ] || { echo "long name has ${#LONG} chars" >&2; exit 1; }
find "$TREE" -type d -exec chmod 755 {} +
find "$TREE" -type f -exec chmod 644 {} +
find "$TREE" -depth -exec touch -h -d "$MTIME" {} +

# ---------------------------------------------------------------- configs
rm -rf "$WORK"; mkdir -p "$WORK"/{nginx,apache,lighttpd,caddy/data,caddy/config,logs,dav-scratch}
for srv in "${DAV_SERVERS[@]}"; do cp -a "$TREE" "$WORK/dav-scratch/$srv"; done
chown -R www-data:www-data "$WORK/dav-scratch/webdav-apache"   # apache writes as www-data
chown www-data:www-data "$WORK/lighttpd"   # lighttpd opens its log after dropping root
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

cat > "$WORK/nginx/nginx.conf" <<CONF
user www-data;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 64; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    server {
        listen 127.0.0.1:${PORT[nginx-html]};
        root $TREE;
        autoindex on;
    }
    server {
        listen 127.0.0.1:${PORT[nginx-json]};
        root $TREE;
        autoindex on;
        autoindex_format json;
    }
}
CONF

M=/usr/lib/apache2/modules
# Apache from Debian's stock module/conf files, unchanged: apache_conf NAME PORT ROOT [dav] writes
# $WORK/NAME/apache2.conf (mod_autoindex listings; with "dav", mod_dav + mod_dav_fs and Dav On as well).
apache_conf() {
  local d="$WORK/$1" dav=${4:-}; mkdir -p "$d/run" "$d/lock"; chown www-data:www-data "$d/lock"
  cat > "$d/apache2.conf" <<CONF
ServerRoot /etc/apache2
DefaultRuntimeDir $d/run
PidFile $d/run/apache2.pid
Mutex file:$d/run default
ErrorLog $d/error.log
Listen 127.0.0.1:$2
ServerName 127.0.0.1
User www-data
Group www-data
LoadModule mpm_event_module $M/mod_mpm_event.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule mime_module $M/mod_mime.so
LoadModule dir_module $M/mod_dir.so
LoadModule autoindex_module $M/mod_autoindex.so
LoadModule alias_module $M/mod_alias.so
$([ -n "$dav" ] && printf 'LoadModule dav_module %s/mod_dav.so\nLoadModule dav_fs_module %s/mod_dav_fs.so\nDavLockDB %s/lock/DavLock' "$M" "$M" "$d")
Include /etc/apache2/mods-available/mime.conf
Include /etc/apache2/mods-available/dir.conf
Include /etc/apache2/mods-available/autoindex.conf
Include /etc/apache2/mods-available/alias.conf
Include /etc/apache2/conf-available/security.conf
DocumentRoot $3
<Directory $3>
    Options Indexes FollowSymLinks
    AllowOverride None
    Require all granted
    $([ -n "$dav" ] && echo "Dav On")
</Directory>
CONF
}
apache_conf apache "${PORT[apache]}" "$TREE"
apache_conf apache-dav "${DAV_PORT[webdav-apache]}" "$TREE" dav
apache_conf apache-dav-scratch "${SCRATCH_PORT[webdav-apache]}" "$WORK/dav-scratch/webdav-apache" dav

cat > "$WORK/lighttpd/lighttpd.conf" <<CONF
server.modules = ( "mod_indexfile", "mod_access", "mod_alias", "mod_redirect" )
server.document-root = "$TREE"
server.errorlog      = "$WORK/lighttpd/error.log"
server.username      = "www-data"
server.groupname     = "www-data"
server.bind          = "127.0.0.1"
server.port          = ${PORT[lighttpd]}
server.http-parseopts = (
  "header-strict" => "enable", "host-strict" => "enable", "host-normalize" => "enable",
  "url-normalize-unreserved" => "enable", "url-normalize-required" => "enable",
  "url-ctrls-reject" => "enable", "url-path-2f-decode" => "enable",
  "url-path-dotseg-remove" => "enable",
)
index-file.names = ( "index.php", "index.html" )
include_shell "/usr/share/lighttpd/create-mime.conf.pl"
server.modules += ( "mod_dirlisting", "mod_staticfile" )
dir-listing.activate = "enable"
dir-listing.encoding = "utf-8"
CONF

cat > "$WORK/caddy/Caddyfile" <<CONF
{
	admin off
	auto_https off
}
http://127.0.0.1:${PORT[caddy]} {
	root * $TREE
	file_server browse
}
CONF

# ---------------------------------------------------------------- start
nginx -c "$WORK/nginx/nginx.conf" -g 'daemon off;' 2>"$WORK/logs/nginx.log" & PIDS+=($!)
apache2 -f "$WORK/apache/apache2.conf" -DFOREGROUND 2>"$WORK/logs/apache.log" & PIDS+=($!)
lighttpd -D -f "$WORK/lighttpd/lighttpd.conf" 2>"$WORK/logs/lighttpd.log" & PIDS+=($!)
XDG_DATA_HOME="$WORK/caddy/data" XDG_CONFIG_HOME="$WORK/caddy/config" \
  caddy run --config "$WORK/caddy/Caddyfile" --adapter caddyfile >"$WORK/logs/caddy.log" 2>&1 & PIDS+=($!)
"$PY" -m http.server --bind 127.0.0.1 "${PORT[python]}" --directory "$TREE" >"$WORK/logs/python.log" 2>&1 & PIDS+=($!)
rclone serve http "$TREE" --addr "127.0.0.1:${PORT[rclone]}" >"$WORK/logs/rclone.log" 2>&1 & PIDS+=($!)
start_dav() {   # folder port root suffix ("" or -scratch)
  local log="$WORK/logs/$1$4.log"
  case "$1" in
    webdav-rclone) rclone serve webdav "$3" --addr "127.0.0.1:$2" >"$log" 2>&1 & ;;
    webdav-wsgidav) "$VENV/bin/wsgidav" --no-config --host 127.0.0.1 --port "$2" --root "$3" \
                      --auth anonymous >"$log" 2>&1 & ;;
    webdav-apache) apache2 -f "$WORK/apache-dav$4/apache2.conf" -DFOREGROUND 2>"$log" & ;;
  esac
  PIDS+=($!)
}
for srv in "${DAV_SERVERS[@]}"; do
  start_dav "$srv" "${DAV_PORT[$srv]}" "$TREE" ""
  start_dav "$srv" "${SCRATCH_PORT[$srv]}" "$WORK/dav-scratch/$srv" -scratch
done

waitfor() {   # name port
  for _ in $(seq 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$2/"; then return 0; fi
    sleep 0.1
  done
  echo "$1 did not start on $2; see $WORK/logs" >&2; exit 1
}
for srv in "${SERVERS[@]}"; do waitfor "$srv" "${PORT[$srv]}"; done
for srv in "${DAV_SERVERS[@]}"; do
  waitfor "$srv" "${DAV_PORT[$srv]}"; waitfor "$srv-scratch" "${SCRATCH_PORT[$srv]}"
done

# ---------------------------------------------------------------- capture
# capture FOLDER PORT [PROPFIND]: every directory of PATHS, body + manifest.json
capture() {
  local srv=$1 port=$2 method=${3:-} dir="$OUT/$1" path name hdr rows
  local req=(); [ -n "$method" ] && req=(-X "$method" -H 'Depth: 1')
  rm -rf "$dir"; mkdir -p "$dir" "$WORK/headers/$srv"
  rows="$WORK/headers/$srv/rows.tsv"; : > "$rows"
  for path in "${PATHS[@]}"; do
    name="${path//\//_}.body"
    hdr="$WORK/headers/$srv/$name.headers"
    curl -s "${req[@]}" -D "$hdr" -o "$dir/$name" "http://127.0.0.1:$port$path"
    printf '%s\t%s\t%s\n' "$path" "$name" "$hdr" >> "$rows"
  done
  "$PY" - "$rows" "$dir/manifest.json" "$method" <<'PYEOF'
import json, sys
out = []
for line in open(sys.argv[1], encoding="utf-8"):
    path, name, hdr = line.rstrip("\n").split("\t")
    lines = open(hdr, "rb").read().decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    ctype = None
    for l in lines[1:]:
        k, _, v = l.partition(":")
        if k.strip().lower() == "content-type":
            ctype = v.strip()
    entry = {"path": path, "file": name, "contentType": ctype, "status": status}
    if sys.argv[3]:
        entry["method"] = sys.argv[3]
    out.append(entry)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(out, f, indent=2, ensure_ascii=False)
    f.write("\n")
PYEOF
}
for srv in "${SERVERS[@]}"; do capture "$srv" "${PORT[$srv]}"; done
for srv in "${DAV_SERVERS[@]}"; do capture "$srv" "${DAV_PORT[$srv]}" PROPFIND; done

# ---------------------------------------------------------------- check
# 1. every file of the tree, URL built by percent-encoding its path, from nginx
# 2. every file link found in each server's listings, fetched from that server
"$PY" - "$OUT" "$TREE" "${PORT[nginx-html]}" "$(declare -p PORT)" <<'PYEOF'
import json, os, re, subprocess, sys
from html.parser import HTMLParser
from urllib.parse import quote, unquote, urljoin, urlsplit
out, tree, nginx_port = sys.argv[1], sys.argv[2], sys.argv[3]
ports = dict(re.findall(r'\[([\w-]+)\]="?(\d+)"?', sys.argv[4]))

def fetch(url):
    r = subprocess.run(["curl", "-s", "--path-as-is", "-w", "%{http_code}", "-o", "/tmp/ferry-capture/fetch.bin", url],
                       capture_output=True, text=True)
    return r.stdout, open("/tmp/ferry-capture/fetch.bin", "rb").read()

problems = 0
for root, dirs, files in os.walk(os.path.join(tree, "pub")):
    for fn in files:
        disk = os.path.join(root, fn)
        url = "http://127.0.0.1:%s%s" % (nginx_port, quote(disk[len(tree):]))
        code, body = fetch(url)
        if code != "200" or body != open(disk, "rb").read():
            problems += 1; print("MISMATCH nginx %s -> %s" % (url, code))
print("nginx direct file check: %s" % ("all files match" if not problems else "%d problems" % problems))

class Links(HTMLParser):
    def __init__(self):
        super().__init__(); self.hrefs = []
    def handle_starttag(self, tag, attrs):
        if tag == "a":
            for k, v in attrs:
                if k == "href" and v is not None: self.hrefs.append(v)

for srv in sorted(ports):
    man = json.load(open(os.path.join(out, srv, "manifest.json")))
    checked = bad = 0; notes = []
    for m in man:
        if m["status"] != 200: continue
        base = "http://127.0.0.1:%s%s" % (ports[srv], m["path"])
        raw = open(os.path.join(out, srv, m["file"]), "rb").read().decode("utf-8")
        if srv == "nginx-json":
            hrefs = [quote(e["name"]) for e in json.loads(raw) if e["type"] == "file"]
        else:
            p = Links(); p.feed(raw); hrefs = p.hrefs
        for h in hrefs:
            if h.startswith("?") or h.endswith("/") or h in ("..", "."): continue
            if re.search(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]", h):
                notes.append("href not URL-safe: %r" % h)
            url = urljoin(base, quote(h, safe="/:?#[]@!$&'()*+,;=%~"))
            sp = urlsplit(url)
            if sp.netloc != "127.0.0.1:%s" % ports[srv] or not sp.path.startswith(urlsplit(base).path):
                continue
            disk = tree + unquote(sp.path)
            if os.path.isdir(disk): continue
            checked += 1
            code, body = fetch(url)
            ok = code == "200" and os.path.isfile(disk) and body == open(disk, "rb").read()
            if not ok:
                bad += 1; notes.append("link %r in %s -> %s %s" % (h, m["path"], code, url))
    print("%s: %d file links fetched, %d bad" % (srv, checked, bad))
    for n in notes: print("   ", n)
PYEOF

# WebDAV: the directory itself must be the first response; every other href is
# a direct child on disk; every file href is fetched (GET) and matched to the
# tree, with getcontentlength. Then a few requests whose answers the README records.
"$PY" - "$OUT" "$TREE" "$(declare -p DAV_PORT)" <<'PYEOF'
import json, os, re, subprocess, sys
import xml.etree.ElementTree as ET
from urllib.parse import unquote
out, tree = sys.argv[1], sys.argv[2]
ports = dict(re.findall(r'\[([\w-]+)\]="?(\d+)"?', sys.argv[3]))
D = "{DAV:}"
for srv in sorted(ports):
    man = json.load(open(os.path.join(out, srv, "manifest.json")))
    checked = bad = 0; notes = []
    for m in man:
        if m["status"] != 207:
            notes.append("%s -> %d" % (m["path"], m["status"])); continue
        root = ET.parse(os.path.join(out, srv, m["file"])).getroot()
        resp = root.findall(D + "response")
        hrefs = [unquote(r.findtext(D + "href")) for r in resp]
        if hrefs[0] != unquote(m["path"]):
            bad += 1; notes.append("first href %r for %s" % (hrefs[0], m["path"]))
        disk_dir = tree + unquote(m["path"])
        on_disk = sorted(os.listdir(disk_dir))
        listed = sorted(h[len(hrefs[0]):].rstrip("/") for h in hrefs[1:])
        if listed != on_disk:
            notes.append("%s: not listed %s, not on disk %s"
                         % (m["path"], sorted(set(on_disk) - set(listed)), sorted(set(listed) - set(on_disk))))
        for r in resp:
            for ps in r.findall(D + "propstat"):
                if " 200 " not in ps.findtext(D + "status"):
                    notes.append("propstat %s in %s" % (ps.findtext(D + "status"), m["path"]))
            if r.find(D + "propstat/" + D + "prop/" + D + "resourcetype/" + D + "collection") is not None:
                continue
            href = r.findtext(D + "href")
            checked += 1
            res = subprocess.run(["curl", "-s", "--path-as-is", "-o", "/tmp/ferry-capture/fetch.bin", "-w", "%{http_code}",
                                  "http://127.0.0.1:%s%s" % (ports[srv], href)], capture_output=True, text=True)
            disk = tree + unquote(href)
            size = r.findtext(D + "propstat/" + D + "prop/" + D + "getcontentlength")
            if res.stdout != "200" or open("/tmp/ferry-capture/fetch.bin", "rb").read() != open(disk, "rb").read() \
               or size != str(os.path.getsize(disk)):
                bad += 1; notes.append("file href %r -> %s (getcontentlength %s)" % (href, res.stdout, size))
    print("%s: %d file hrefs fetched, %d bad" % (srv, checked, bad))
    for n in notes: print("   ", n)
PYEOF
w() { curl -s -o /dev/null -w '%{http_code} %{content_type} -> %{redirect_url}' "$@" | sed 's/ -> $//'; }
for srv in "${DAV_SERVERS[@]}"; do
  u="http://127.0.0.1:${DAV_PORT[$srv]}"; s="http://127.0.0.1:${SCRATCH_PORT[$srv]}"
  echo "$srv:"
  echo "    PROPFIND /pub (Depth 1): $(w -X PROPFIND -H 'Depth: 1' "$u/pub")"
  echo "    GET /pub/: $(w "$u/pub/")"
  printf 'hello\n' > "$WORK/x.txt"
  echo "    on a copy: MKCOL /pub/newdir/: $(w -X MKCOL "$s/pub/newdir/")," \
       "PUT /pub/newdir/x.txt: $(w -T "$WORK/x.txt" "$s/pub/newdir/x.txt")," \
       "MKCOL /pub/newdir/ again: $(w -X MKCOL "$s/pub/newdir/")," \
       "file: $(cat "$WORK/dav-scratch/$srv/pub/newdir/x.txt" 2>&1)"
done

echo "versions:"
nginx -v 2>&1
apache2 -v | sed -n 1p
lighttpd -v
echo "caddy $(caddy version)"
"$PY" --version
rclone version | sed -n 1p
echo "wsgidav $("$VENV/bin/wsgidav" --version), cheroot $("$VENV/bin/python" -c 'import cheroot; print(cheroot.__version__)')"
echo "done: $OUT"
