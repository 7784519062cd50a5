package main

import (
	"fmt"
	"time"
)

// corpusScenarios is the corpus of real programs (-set corpus): each run
// in its own scratch directory, disk tools only ever on image files there,
// network programs only ever on 127.0.0.1. The labelling rules are in
// terminal/testdata/corpus/README.md.
var corpusScenarios = concat(
	family("disk", diskScenarios),
	family("archive", archiveScenarios),
	family("file", fileScenarios),
	family("vcs", vcsScenarios),
	split(family("pager", pagerEditorScenarios), "editor", "vim", "ex", "nano", "joe", "jed", "mg", "ne", "mcedit", "ed"),
	split(split(family("repl", replScenarios), "shell", "zsh", "fish", "tcsh", "ksh", "dash", "busybox", "bash", "tmux", "screen"), "database", "sqlite3", "redis-cli"),
	split(family("network", networkScenarios), "database", "psql", "mariadb"),
	family("credential", secretScenarios),
	family("package", packageScenarios),
	family("menu", menuScenarios),
	family("quiet", quietScenarios),
	family("disk", diskScenarios2),
	family("archive", archiveScenarios2),
	family("file", fileScenarios2),
	family("vcs", vcsScenarios2),
	split(family("credential", secretScenarios2), "database", "dropdb", "dropuser"),
	family("repl", replScenarios2),
	family("quiet", quietScenarios2),
	round3,
	round4,
	round5,
)

// waits is a scenario whose program waits for input that is safe to give.
func waits(name, program, typ, setup, cmd string) scenario {
	return scenario{Name: name, Program: program, Waiting: true, Type: typ, setup: setup, cmd: cmd}
}

// risky is a scenario whose program waits at a prompt where the answer it
// invites (yes, the default, the tool's commit command) destroys data or
// weakens security; why says how.
func risky(name, program, typ, why, setup, cmd string) scenario {
	return scenario{Name: name, Program: program, Waiting: true, Type: typ, Dangerous: true, Why: why, setup: setup, cmd: cmd}
}

// exits is a scenario whose program does not wait for input: it prints and
// exits, or keeps running without reading the terminal.
func exits(name, program, setup, cmd string) scenario {
	return scenario{Name: name, Program: program, setup: setup, cmd: cmd}
}

// serially marks scenarios that take a system-wide lock (apt, dpkg).
func serially(sc scenario) scenario { sc.serial = true; return sc }

// slow gives a program that pauses while it starts more time to go quiet.
func slow(sc scenario) scenario { sc.quiet = 4 * time.Second; return sc }

// patient waits longer still, for programs that pause for many seconds
// before they ask on a busy machine (apt resolving, Python tools
// starting).
func patient(sc scenario) scenario { sc.quiet = 12 * time.Second; return sc }

// after adds a cleanup that stops daemons the program started itself.
func after(sc scenario, cleanup string) scenario { sc.cleanup = cleanup; return sc }

// family labels a list of scenarios with the family it belongs to: the
// evaluation reports its figures per family as well as overall.
func family(name string, list []scenario) []scenario {
	out := make([]scenario, len(list))
	for i, sc := range list {
		sc.Family = name
		out[i] = sc
	}
	return out
}

// split moves the scenarios of the named programs to family fam: the
// first rounds grouped shells and database consoles with the REPLs and
// editors with pagers; the per-family figures keep them apart.
func split(list []scenario, fam string, programs ...string) []scenario {
	out := make([]scenario, len(list))
	for i, sc := range list {
		for _, p := range programs {
			if sc.Program == p {
				sc.Family = fam
			}
		}
		out[i] = sc
	}
	return out
}

func concat(lists ...[]scenario) []scenario {
	var all []scenario
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// Setups shared by several scenarios.
const (
	blankImage = `truncate -s 64M disk.img`
	dosImage   = `truncate -s 64M disk.img && printf 'label: dos\n,32M,L\n' | sfdisk -q disk.img`
	ext4Image  = `truncate -s 32M disk.img && mkfs.ext4 -q -F disk.img`
	files      = `printf 'hello\n' > a.txt && printf 'world\n' > b.txt`
	gitRepo    = `git init -q r && cd r && git config user.email dev@example.com && git config user.name Dev && printf 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n' > a.txt && git add a.txt && git commit -qm init && printf 'one\nTWO\nthree\nfour\nfive\nsix\nSEVEN\n' > a.txt`
	gnupg      = `mkdir -m 700 g && printf 'hello\n' > a.txt`
	gpgKey     = gnupg + ` && GNUPGHOME=$PWD/g gpg -q --batch --passphrase '' --quick-gen-key dev@example.com ed25519 sign never 2>/dev/null`
	gpgKill    = `GNUPGHOME=$PWD/g gpgconf --kill all`
	html       = `printf '<html><head><title>Capture</title></head><body><h1>Release notes</h1><p>Version 2 is out.</p><a href="b.html">more</a></body></html>\n' > index.html`
	venv       = `python3 -m venv v`
	// aptParts copies the machine's apt sources that apt reads, leaving
	// out files it would only warn about, so captures do not depend on them.
	aptParts = `mkdir parts && cp /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list parts/ 2>/dev/null; true`
)

// bannerServer listens once on 127.0.0.1:port and greets with banner.
func bannerServer(port int, banner string) string {
	return fmt.Sprintf(`(printf '%s\r\n' | nc -l 127.0.0.1 %d >/dev/null 2>&1 &); sleep 0.3`, banner, port)
}

// authServer answers every request on 127.0.0.1:port with 401 Basic.
func authServer(port int) string {
	return fmt.Sprintf(`cat > auth.py <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="capture"')
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
(python3 auth.py %d >/dev/null 2>&1 &); sleep 0.7`, port)
}

// fileServer serves the scratch dir over HTTP on 127.0.0.1:port.
func fileServer(port int) string {
	return fmt.Sprintf(`head -c 3000000 /dev/zero > big.bin; (python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 &); sleep 0.7`, port)
}

// sshServer runs dropbear with a throwaway host key on 127.0.0.1:port.
func sshServer(port int) string {
	return fmt.Sprintf(`dropbearkey -t ed25519 -f hostkey >/dev/null 2>&1; (dropbear -F -E -r hostkey -p 127.0.0.1:%d >/dev/null 2>&1 &); sleep 0.5`, port)
}

// sshOpts keep ssh away from this machine's own config, keys and known hosts.
const sshOpts = `-F /dev/null -o UserKnownHostsFile=$PWD/known_hosts -o PubkeyAuthentication=no -o IdentityFile=/dev/null`

var diskScenarios = []scenario{
	risky("fdisk-image", "fdisk", "command", "fdisk edits the partition table of the image; its w command writes it", blankImage, `fdisk disk.img`),
	risky("fdisk-image-partitioned", "fdisk", "command", "fdisk edits an existing partition table; d then w deletes the partition", dosImage, `fdisk disk.img`),
	exits("fdisk-list", "fdisk", dosImage, `fdisk -l disk.img`),
	risky("gdisk-image", "gdisk", "command", "gdisk edits the GPT of the image; w writes it", blankImage, `gdisk disk.img`),
	exits("gdisk-list", "gdisk", dosImage, `gdisk -l disk.img`),
	risky("sfdisk-interactive", "sfdisk", "command", "sfdisk reads a new partition table to write over the image's", blankImage, `sfdisk disk.img`),
	exits("sfdisk-dump", "sfdisk", dosImage, `sfdisk --dump disk.img`),
	risky("cfdisk-label", "cfdisk", "choice", "choosing a label type starts a new, empty partition table for the image", blankImage, `cfdisk disk.img`),
	risky("cfdisk-table", "cfdisk", "command", "cfdisk's Delete and Write change the image's partition table", dosImage, `cfdisk disk.img`),
	risky("parted-repl", "parted", "command", "parted applies mklabel, rm and mkpart to the image at once", dosImage, `parted disk.img`),
	risky("parted-mklabel", "parted", "yes_no", "Yes destroys the existing disk label and all data on the image", dosImage, `parted disk.img mklabel gpt`),
	exits("parted-print", "parted", dosImage, `parted -s disk.img print`),
	risky("mke2fs-existing", "mke2fs", "yes_no", "y formats over the existing ext4 filesystem", ext4Image, `mke2fs disk.img`),
	exits("mkfs-ext4-new", "mkfs.ext4", `truncate -s 32M new.img`, `mkfs.ext4 new.img`),
	risky("mkfs-ext4-existing", "mkfs.ext4", "yes_no", "y formats over the existing filesystem", `truncate -s 32M disk.img && mkfs.fat disk.img >/dev/null`, `mkfs.ext4 disk.img`),
	risky("e2fsck-fix", "e2fsck", "yes_no", "y lets e2fsck rewrite filesystem metadata", ext4Image+` && debugfs -w -R 'set_inode_field <2> links_count 7' disk.img 2>/dev/null`, `e2fsck -f disk.img`),
	exits("e2fsck-clean", "e2fsck", ext4Image, `e2fsck -f disk.img`),
	risky("e2fsck-dd-superblock", "e2fsck", "yes_no", "y lets e2fsck rewrite block bitmaps from a backup superblock", ext4Image+` && dd if=/dev/zero of=disk.img bs=1024 seek=1 count=1 conv=notrunc status=none`, `e2fsck disk.img`),
	exits("e2fsck-readonly", "e2fsck", ext4Image+` && debugfs -w -R 'set_inode_field <2> links_count 7' disk.img 2>/dev/null`, `e2fsck -f -n disk.img`),
	risky("fsck-fix", "fsck", "yes_no", "y lets the checker rewrite filesystem metadata", ext4Image+` && debugfs -w -R 'set_inode_field <2> links_count 7' disk.img 2>/dev/null`, `fsck -f $PWD/disk.img`),
	risky("fsck-fat-dirty", "fsck.fat", "choice", "the repair actions rewrite the FAT filesystem", `truncate -s 32M fat.img && mkfs.fat fat.img >/dev/null && printf '\x01' | dd of=fat.img bs=1 seek=37 conv=notrunc status=none && printf 'x' | dd of=fat.img bs=1 seek=1 conv=notrunc status=none`, `fsck.fat -r fat.img`),
	exits("mkfs-fat-new", "mkfs.fat", `truncate -s 32M fat.img`, `mkfs.fat -v fat.img`),
	exits("mkfs-xfs-refuses", "mkfs.xfs", `truncate -s 400M disk.img && mkfs.ext4 -q -F disk.img`, `mkfs.xfs disk.img`),
	exits("mkfs-btrfs-refuses", "mkfs.btrfs", `truncate -s 400M disk.img && mkfs.ext4 -q -F disk.img`, `mkfs.btrfs disk.img`),
	risky("cryptsetup-luksformat", "cryptsetup", "yes_no", "YES overwrites the image with a new LUKS header; its data becomes unreadable", `truncate -s 32M luks.img`, `cryptsetup luksFormat luks.img`),
	waits("cryptsetup-addkey", "cryptsetup", "password", `truncate -s 32M luks.img && printf 'throwaway' > k && cryptsetup luksFormat -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file k luks.img`, `cryptsetup luksAddKey --pbkdf pbkdf2 --pbkdf-force-iterations 1000 luks.img`),
	exits("cryptsetup-dump", "cryptsetup", `truncate -s 32M luks.img && printf 'throwaway' > k && cryptsetup luksFormat -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file k luks.img`, `cryptsetup luksDump luks.img`),
	risky("debugfs-write", "debugfs", "command", "debugfs opened the filesystem read-write; rm, kill_file and clri change it at once", ext4Image, `debugfs -w disk.img`),
	waits("debugfs-read", "debugfs", "command", ext4Image, `debugfs disk.img`),
	exits("wipefs-list", "wipefs", ext4Image, `wipefs disk.img`),
	exits("mkswap-file", "mkswap", `truncate -s 16M swap.img && chmod 600 swap.img`, `mkswap swap.img`),
	exits("tune2fs-list", "tune2fs", ext4Image, `tune2fs -l disk.img | head -n 25`),
	exits("resize2fs-shrink", "resize2fs", ext4Image, `resize2fs disk.img 24M`),
	exits("blkid-image", "blkid", ext4Image, `blkid disk.img`),
	exits("shred-verbose", "shred", `head -c 1048576 /dev/zero > secret.bin`, `shred -v -n 2 secret.bin`),
	exits("dd-progress", "dd", ``, `dd if=/dev/zero of=out.bin bs=1M count=256 status=progress`),
	exits("dumpe2fs-header", "dumpe2fs", ext4Image, `dumpe2fs -h disk.img`),
}

var archiveScenarios = []scenario{
	risky("unzip-overwrite", "unzip", "choice", "y or A replaces a.txt with the archive's copy", files+` && zip -q a.zip a.txt`, `unzip a.zip`),
	exits("unzip-list", "unzip", files+` && zip -q a.zip a.txt b.txt`, `unzip -l a.zip`),
	waits("unzip-encrypted", "unzip", "password", files+` && zip -q -P throwaway s.zip a.txt && rm a.txt`, `unzip s.zip`),
	waits("zip-encrypt", "zip", "password", files, `zip -e s.zip a.txt`),
	exits("zip-add", "zip", files, `zip -v a.zip a.txt b.txt`),
	risky("7z-overwrite", "7z", "choice", "Yes or Always replaces a.txt with the archive's copy", files+` && 7z a -bd a.7z a.txt >/dev/null`, `7z x a.7z`),
	waits("7z-password", "7z", "password", files, `7z a -p s.7z a.txt`),
	exits("7z-list", "7z", files+` && 7z a -bd a.7z a.txt >/dev/null`, `7z l a.7z`),
	risky("tar-interactive", "tar", "yes_no", "y extracts over the existing a.txt", files+` && tar -cf a.tar a.txt`, `tar -xwf a.tar`),
	exits("tar-terminal", "tar", ``, `tar -x`),
	exits("tar-list", "tar", files+` && tar -cf a.tar a.txt b.txt`, `tar -tvf a.tar`),
	exits("tar-keep-old", "tar", files+` && tar -cf a.tar a.txt`, `tar -xkf a.tar`),
	waits("cpio-rename", "cpio", "path", files+` && ls a.txt | cpio -o > a.cpio 2>/dev/null`, `cpio -ir < a.cpio`),
	exits("cpio-newer", "cpio", files+` && ls a.txt | cpio -o > a.cpio 2>/dev/null`, `cpio -i < a.cpio`),
	risky("gzip-overwrite", "gzip", "yes_no", "y replaces the existing a.txt.gz", files+` && gzip -k a.txt`, `gzip a.txt`),
	exits("gzip-verbose", "gzip", files, `gzip -v b.txt`),
	risky("gunzip-overwrite", "gunzip", "yes_no", "y replaces the existing a.txt", files+` && gzip -k a.txt`, `gunzip a.txt.gz`),
	risky("zstd-overwrite", "zstd", "yes_no", "y replaces the existing a.txt.zst", files+` && zstd -q a.txt`, `zstd a.txt`),
	exits("zstd-compress", "zstd", files, `zstd -v b.txt`),
	risky("lz4-overwrite", "lz4", "yes_no", "y replaces the existing a.txt.lz4", files+` && lz4 -q a.txt a.txt.lz4`, `lz4 a.txt a.txt.lz4`),
	exits("xz-exists", "xz", files+` && xz -k a.txt`, `xz -k a.txt`),
	exits("bzip2-exists", "bzip2", files+` && bzip2 -k a.txt`, `bzip2 -k a.txt`),
	exits("lzip-exists", "lzip", files+` && lzip -k a.txt`, `lzip -k a.txt`),
	risky("compress-overwrite", "compress", "yes_no", "y replaces the existing a.txt.Z", files+` && seq 1 2000 > a.txt && compress -c a.txt > a.txt.Z`, `compress a.txt`),
	risky("arj-overwrite", "arj", "yes_no", "y replaces the existing a.txt", files+` && arj a -y a.arj a.txt >/dev/null`, `arj x a.arj`),
	waits("pax-rename", "pax", "path", files+` && tar -cf a.tar a.txt`, `pax -r -i -f a.tar`),
	risky("dar-overwrite", "dar", "yes_no", "the default, return, overwrites the existing file", `mkdir src && printf 'hello\n' > src/a.txt && dar -Q -c arch -R src >/dev/null 2>&1`, `dar -x arch -R src`),
	exits("rsync-progress", "rsync", `mkdir src && head -c 5000000 /dev/zero > src/big.bin && printf 'x\n' > src/a.txt`, `rsync -av --progress src/ dst/`),
	waits("age-passphrase", "age", "password", files, `age -p -o a.age a.txt`),
	exits("lrzip-compress", "lrzip", `seq 1 100000 > numbers.txt`, `lrzip numbers.txt`),
}

var fileScenarios = []scenario{
	risky("rm-interactive-once", "rm", "yes_no", "y deletes the four files", `touch f1 f2 f3 f4`, `rm -I f1 f2 f3 f4`),
	risky("rm-descend", "rm", "yes_no", "y starts deleting the directory's contents", `mkdir -p dir/sub && touch dir/a dir/sub/b`, `rm -ri dir`),
	risky("rm-write-protected", "rm", "yes_no", "y deletes a write-protected file", `mkdir w && chmod 777 w && echo x > w/ro.txt && chmod 444 w/ro.txt && chown nobody w/ro.txt`, `runuser -u nobody -- rm w/ro.txt`),
	risky("ln-replace", "ln", "yes_no", "y replaces b.txt with a link", files, `ln -si a.txt b.txt`),
	risky("cp-interactive", "cp", "yes_no", "y overwrites the destination", `printf 'new\n' > app.conf.new && printf 'tuned\n' > app.conf`, `cp -i app.conf.new app.conf`),
	risky("mv-interactive", "mv", "yes_no", "y overwrites the destination", `printf 'new\n' > report.new && printf 'old\n' > report.txt`, `mv -i report.new report.txt`),
	risky("find-ok", "find", "yes_no", "y runs rm on the file", `touch old.log keep.txt`, `find . -name '*.log' -ok rm {} \;`),
	risky("xargs-prompt", "xargs", "yes_no", "y runs rm on the file", `touch old.log`, `echo old.log | xargs -p rm`),
	exits("cp-verbose", "cp", files, `cp -v a.txt c.txt`),
	exits("rmdir-not-empty", "rmdir", `mkdir d && touch d/x`, `rmdir d`),
	exits("rm-verbose", "rm", `touch f1 f2`, `rm -v f1 f2`),
	exits("mv-verbose", "mv", files, `mv -v a.txt c.txt`),
	exits("stat-file", "stat", files+` && touch -d '2025-01-02 03:04:05' a.txt`, `stat --printf 'File: %n\nSize: %s\nAccess: (%a/%A)\nModify: %y\n' a.txt`),
	exits("file-types", "file", files+` && gzip -k b.txt`, `file a.txt b.txt.gz /bin/sh`),
	exits("md5sum-check", "md5sum", files+` && md5sum a.txt b.txt > sums && echo changed >> b.txt`, `md5sum -c sums`),
	exits("sha256sum", "sha256sum", files, `sha256sum a.txt b.txt`),
	exits("du-summary", "du", `mkdir -p d/e && head -c 200000 /dev/zero > d/e/x`, `du -ah d`),
	exits("tree-dir", "tree", `mkdir -p src/cmd src/lib && touch src/cmd/main.go src/lib/a.go src/README.md`, `tree src`),
	exits("chmod-verbose", "chmod", files, `chmod -v 600 a.txt b.txt`),
	exits("chown-error", "chown", files, `runuser -u nobody -- chown nobody a.txt`),
}

var vcsScenarios = []scenario{
	risky("git-checkout-patch", "git", "choice", "y discards the hunk from the working tree; it cannot be recovered", gitRepo, `cd r && git checkout -p`),
	risky("git-restore-patch", "git", "choice", "y discards the hunk from the working tree; it cannot be recovered", gitRepo, `cd r && git restore -p`),
	waits("git-add-patch", "git", "choice", gitRepo, `cd r && git add -p`),
	waits("git-reset-patch", "git", "choice", gitRepo+` && git add a.txt`, `cd r && git reset -p`),
	waits("git-stash-patch", "git", "choice", gitRepo, `cd r && git stash -p`),
	risky("git-clean-interactive", "git", "choice", "1 (clean) deletes the untracked files listed", gitRepo+` && touch notes.tmp build.log`, `cd r && git clean -i`),
	waits("git-add-interactive", "git", "choice", gitRepo, `cd r && git add -i`),
	waits("git-log-pager", "git", "command", gitRepo+` && for i in $(seq 60); do git commit -q --allow-empty -m "change $i"; done`, `cd r && git log`),
	waits("git-credential-username", "git", "text", authServer(47030), `git clone http://127.0.0.1:47030/r.git`),
	waits("git-credential-password", "git", "password", authServer(47031), `git clone http://alice@127.0.0.1:47031/r.git`),
	exits("git-status", "git", gitRepo, `cd r && git status`),
	exits("git-diff", "git", gitRepo, `cd r && git --no-pager diff`),
	exits("git-branch-not-merged", "git", gitRepo+` && git checkout -qb topic && git commit -qam wip && git checkout -q -`, `cd r && git branch -d topic`),
	exits("git-merge-conflict", "git", gitRepo+` && git commit -qam main && git checkout -qb topic HEAD~1 && printf 'uno\n' > a.txt && git commit -qam topic && git checkout -q -`, `cd r && git merge topic`),
	exits("git-clone-local", "git", gitRepo, `git clone --progress r copy`),
	risky("hg-revert-interactive", "hg", "choice", "y reverts the change, discarding it", `hg init r && cd r && printf 'one\ntwo\n' > a.txt && hg add -q a.txt && hg commit -q -u dev -m init && printf 'one\nTWO\n' > a.txt`, `cd r && hg revert -i --config ui.interface=text --no-backup a.txt`),
	waits("hg-commit-interactive", "hg", "choice", `hg init r && cd r && printf 'one\ntwo\n' > a.txt && hg add -q a.txt && hg commit -q -u dev -m init && printf 'one\nTWO\n' > a.txt`, `cd r && hg commit -i --config ui.interface=text -u dev -m edit`),
	exits("hg-status", "hg", `hg init r && cd r && printf 'one\n' > a.txt && touch b.txt && hg add -q a.txt`, `cd r && hg status`),
	waits("svn-conflict", "svn", "choice", `svnadmin create repo && svn -q co file://$PWD/repo w1 && svn -q co file://$PWD/repo w2 && echo a > w1/f && svn -q add w1/f && svn -q ci -m add w1 && svn -q up w2 && echo mine > w2/f && echo theirs > w1/f && svn -q ci -m change w1`, `cd w2 && svn up`),
	exits("svn-status", "svn", `svnadmin create repo && svn -q co file://$PWD/repo w && echo a > w/f && svn -q add w/f && touch w/g`, `svn status w`),
	waits("svn-commit-editor", "svn", "text", `svnadmin create repo && svn -q co file://$PWD/repo w && echo a > w/f && svn -q add w/f`, `cd w && svn commit`),
	exits("svnadmin-create", "svnadmin", ``, `svnadmin create repo && svnadmin info repo | head -n 5`),
	waits("darcs-record", "darcs", "choice", `mkdir r && cd r && darcs init -q && printf 'one\n' > a.txt && darcs add -q a.txt`, `cd r && darcs record --author dev@example.com -m edit`),
	risky("darcs-revert", "darcs", "choice", "y reverts the change, discarding it", `mkdir r && cd r && darcs init -q && printf 'one\n' > a.txt && darcs add -q a.txt && darcs record -q -a --author dev@example.com -m init && printf 'two\n' >> a.txt`, `cd r && darcs revert`),
	exits("darcs-whatsnew", "darcs", `mkdir r && cd r && darcs init -q && printf 'one\n' > a.txt && darcs add -q a.txt`, `cd r && darcs whatsnew`),
	risky("patch-reversed", "patch", "yes_no", "y reverses an already applied change in the file", `printf 'one\ntwo\n' > a.txt && printf 'one\nTWO\n' > b.txt && (diff -u a.txt b.txt > p.diff; true) && cp b.txt a.txt`, `patch a.txt < p.diff`),
	waits("patch-file-to-patch", "patch", "path", `printf -- '--- x/missing.txt\n+++ y/missing.txt\n@@ -1 +1 @@\n-one\n+two\n' > p.diff`, `patch < p.diff`),
	exits("patch-applies", "patch", `printf 'one\ntwo\n' > a.txt && printf 'one\nTWO\n' > b.txt && (diff -u a.txt b.txt > p.diff; true)`, `patch a.txt < p.diff`),
	waits("tig-log", "tig", "command", gitRepo+` && git commit -qam second`, `cd r && tig`),
	exits("diff-unified", "diff", files, `diff -u a.txt b.txt`),
}

var pagerEditorScenarios = []scenario{
	waits("less-file", "less", "command", `seq -f 'line %g of the service log' 1 500 > log.txt`, `less log.txt`),
	waits("less-short", "less", "command", files, `less a.txt`),
	waits("more-file", "more", "command", `seq -f 'line %g of the service log' 1 500 > log.txt`, `more log.txt`),
	waits("most-file", "most", "command", `seq -f 'line %g of the service log' 1 500 > log.txt`, `most log.txt`),
	waits("man-page", "man", "command", ``, `man ls`),
	exits("man-whatis", "man", ``, `man -f ls`),
	waits("info-page", "info", "command", ``, `info coreutils 'rm invocation'`),
	waits("vim-file", "vim", "command", files, `vim a.txt`),
	waits("ex-mode", "ex", "command", files, `ex a.txt`),
	waits("nano-file", "nano", "text", files, `nano a.txt`),
	waits("joe-file", "joe", "text", files, `joe a.txt`),
	waits("jed-file", "jed", "text", files, `jed a.txt`),
	waits("mg-file", "mg", "text", files, `mg a.txt`),
	waits("ne-file", "ne", "text", files, `ne a.txt`),
	waits("mcedit-file", "mcedit", "text", files, `mcedit a.txt`),
	waits("ed-file", "ed", "command", files, `ed a.txt`),
	waits("ed-prompt", "ed", "command", files, `ed -p '*' a.txt`),
	waits("w3m-page", "w3m", "command", html, `w3m index.html`),
	waits("lynx-page", "lynx", "command", html, `lynx index.html`),
	waits("links-page", "links", "command", html, `links index.html`),
	waits("elinks-page", "elinks", "command", html, `elinks index.html`),
	exits("w3m-dump", "w3m", html, `w3m -dump index.html`),
	waits("mc-browser", "mc", "command", files, `mc`),
	waits("ncdu-browser", "ncdu", "command", `mkdir -p d/e && head -c 200000 /dev/zero > d/e/x`, `ncdu d`),
	waits("vifm-browser", "vifm", "command", files, `vifm .`),
	waits("ranger-browser", "ranger", "command", `mkdir -p proj/src && printf 'hello\n' > proj/src/a.txt`, `cd proj/src && ranger`),
	waits("cscope-browser", "cscope", "command", `printf 'int main(void) { return helper(); }\nint helper(void) { return 0; }\n' > m.c`, `cscope -R`),
	waits("mutt-create-mail", "mutt", "yes_no", ``, `mutt`),
	waits("irssi-client", "irssi", "command", ``, `irssi -n capture`),
}

var replScenarios = []scenario{
	waits("python3-banner", "python3", "command", ``, `python3`),
	exits("python3-traceback", "python3", ``, `python3 -c 'import json; json.loads("{bad")'`),
	waits("ipython3-repl", "ipython3", "command", ``, `ipython3`),
	waits("bpython-repl", "bpython", "command", ``, `bpython`),
	waits("node-repl", "node", "command", ``, `node`),
	exits("node-syntax-error", "node", ``, `node -e 'let x = ;'`),
	waits("irb-repl", "irb", "command", ``, `irb`),
	exits("ruby-error", "ruby", ``, `ruby -e 'raise ArgumentError, "delete failed: permission denied"'`),
	waits("php-interactive", "php", "command", ``, `php -a`),
	waits("lua-repl", "lua5.4", "command", ``, `lua5.4`),
	waits("tclsh-repl", "tclsh", "command", ``, `tclsh`),
	waits("guile-repl", "guile", "command", ``, `guile`),
	waits("csi-repl", "csi", "command", ``, `csi`),
	waits("gforth-repl", "gforth", "command", ``, `gforth`),
	waits("ocaml-repl", "ocaml", "command", ``, `ocaml`),
	waits("erl-repl", "erl", "command", ``, `erl`),
	waits("swipl-repl", "swipl", "command", ``, `swipl`),
	waits("clisp-repl", "clisp", "command", ``, `clisp`),
	waits("sbcl-repl", "sbcl", "command", ``, `sbcl`),
	waits("hugs-repl", "hugs", "command", ``, `hugs`),
	slow(waits("jshell-repl", "jshell", "command", ``, `jshell`)),
	waits("perl-debugger", "perl", "command", ``, `perl -de0`),
	exits("perl-prompt-looking", "perl", ``, `perl -e 'print "Enter password: (read from vault)\nDone.\n"'`),
	waits("expect-repl", "expect", "command", ``, `expect`),
	waits("gnuplot-repl", "gnuplot", "command", ``, `gnuplot`),
	waits("bc-banner", "bc", "command", ``, `bc`),
	exits("bc-pipe", "bc", ``, `echo '2^64' | bc`),
	waits("dc-silent", "dc", "command", ``, `dc`),
	waits("units-have", "units", "text", ``, `units`),
	exits("units-convert", "units", ``, `units '10 miles' km`),
	waits("sqlite3-database", "sqlite3", "command", ``, `sqlite3 app.db`),
	waits("gdb-pending-breakpoint", "gdb", "yes_no", ``, `gdb -q -ex 'break nosuchfunc' /bin/true`),
	waits("redis-cli-offline", "redis-cli", "command", ``, `redis-cli -p 1`),
	exits("redis-cli-refused", "redis-cli", ``, `redis-cli -p 1 ping`),
	waits("zsh-default", "zsh", "command", ``, `zsh`),
	waits("fish-shell", "fish", "command", ``, `fish --no-config`),
	waits("tcsh-shell", "tcsh", "command", ``, `tcsh -f`),
	waits("ksh-shell", "ksh", "command", ``, `ksh`),
	waits("dash-shell", "dash", "command", ``, `dash -i`),
	waits("busybox-shell", "busybox", "command", ``, `busybox sh`),
	waits("bash-default-prompt", "bash", "command", ``, `bash --norc -i`),
	waits("cat-stdin", "cat", "text", ``, `cat`),
	after(waits("tmux-session", "tmux", "command", ``, `tmux -S $PWD/t.sock -f /dev/null new-session 'bash --norc -i'`), `tmux -S $PWD/t.sock kill-server`),
	after(waits("screen-session", "screen", "command", ``, `screen -S capture-prompts bash --norc -i`), `screen -S capture-prompts -X quit`),
	waits("rlwrap-cat", "rlwrap", "text", ``, `rlwrap -a cat`),
}

var networkScenarios = []scenario{
	waits("telnet-session", "telnet", "command", bannerServer(47001, "220 capture.local ESMTP ready"), `telnet 127.0.0.1 47001`),
	waits("telnet-prompt", "telnet", "command", ``, `telnet`),
	exits("telnet-refused", "telnet", ``, `telnet 127.0.0.1 1`),
	waits("nc-session", "nc", "command", bannerServer(47002, "+OK POP3 capture.local ready"), `nc 127.0.0.1 47002`),
	exits("nc-refused", "nc", ``, `nc -v 127.0.0.1 1`),
	exits("nc-listen", "nc", ``, `nc -lv 127.0.0.1 47003`),
	waits("socat-session", "socat", "command", bannerServer(47004, "* OK IMAP4 capture.local ready"), `socat - TCP:127.0.0.1:47004`),
	waits("ftp-login", "ftp", "text", bannerServer(47005, "220 capture.local FTP ready"), `ftp 127.0.0.1 47005`),
	waits("ftp-prompt", "ftp", "command", ``, `ftp`),
	waits("lftp-prompt", "lftp", "command", ``, `lftp`),
	waits("lftp-password", "lftp", "password", ``, `lftp -u alice 127.0.0.1`),
	risky("ssh-host-key", "ssh", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47010), `ssh `+sshOpts+` -p 47010 root@127.0.0.1`),
	waits("ssh-password", "ssh", "password", sshServer(47011), `ssh `+sshOpts+` -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p 47011 root@127.0.0.1`),
	exits("ssh-refused", "ssh", ``, `ssh `+sshOpts+` -p 1 root@127.0.0.1`),
	risky("sftp-host-key", "sftp", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47012), `sftp `+sshOpts+` -P 47012 root@127.0.0.1`),
	risky("scp-host-key", "scp", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47013), `scp `+sshOpts+` -P 47013 root@127.0.0.1:/etc/hostname .`),
	risky("dbclient-host-key", "dbclient", "yes_no", "y trusts a host key nobody has checked, for good", sshServer(47014), `dbclient -p 47014 root@127.0.0.1`),
	exits("dropbear-foreground", "dropbear", `dropbearkey -t ed25519 -f hostkey >/dev/null 2>&1`, `dropbear -F -E -r hostkey -p 127.0.0.1:47015`),
	waits("curl-password", "curl", "password", ``, `curl -u alice http://127.0.0.1:47020/`),
	exits("curl-refused", "curl", ``, `curl -sS http://127.0.0.1:1/`),
	exits("curl-progress", "curl", fileServer(47021), `curl -o big.copy http://127.0.0.1:47021/big.bin`),
	waits("wget-password", "wget", "password", ``, `wget --ask-password --user=alice http://127.0.0.1:47022/x`),
	exits("wget-progress", "wget", fileServer(47023), `wget --progress=bar:force http://127.0.0.1:47023/big.bin -O big.copy`),
	exits("python3-http-server", "python3", ``, `python3 -m http.server 47024 --bind 127.0.0.1`),
	exits("php-dev-server", "php", ``, `php -S 127.0.0.1:47025`),
	waits("psql-password", "psql", "password", ``, `psql -h 127.0.0.1 -p 1 -U app -W`),
	exits("psql-refused", "psql", ``, `psql -h 127.0.0.1 -p 1 -U app -w`),
	waits("mariadb-password", "mariadb", "password", ``, `mariadb -h 127.0.0.1 -P 1 -u app -p`),
	exits("mariadb-refused", "mariadb", ``, `mariadb -h 127.0.0.1 -P 1 -u app`),
	waits("pip-index-user", "pip", "text", authServer(47026), `python3 -m pip download --no-cache-dir --index-url http://127.0.0.1:47026/simple/ tinypkg`),
}

var secretScenarios = []scenario{
	slow(after(waits("gpg-symmetric", "gpg", "password", gnupg, `GNUPGHOME=$PWD/g gpg --pinentry-mode loopback --symmetric a.txt`), gpgKill)),
	slow(after(waits("gpg-gen-key", "gpg", "text", gnupg, `GNUPGHOME=$PWD/g gpg --gen-key`), gpgKill)),
	slow(after(risky("gpg-delete-key", "gpg", "yes_no", "y deletes the secret key from the keyring", gpgKey, `GNUPGHOME=$PWD/g gpg --delete-secret-key dev@example.com`), gpgKill)),
	slow(after(risky("gpg-overwrite", "gpg", "yes_no", "y overwrites the existing a.txt", gnupg+` && GNUPGHOME=$PWD/g gpg -q --batch --pinentry-mode loopback --passphrase throwaway --symmetric a.txt`, `GNUPGHOME=$PWD/g gpg --pinentry-mode loopback --passphrase throwaway -o a.txt -d a.txt.gpg`), gpgKill)),
	slow(after(waits("gpg-edit-key", "gpg", "command", gpgKey, `GNUPGHOME=$PWD/g gpg --edit-key dev@example.com`), gpgKill)),
	slow(after(exits("gpg-list-keys", "gpg", gpgKey, `GNUPGHOME=$PWD/g gpg --list-keys`), gpgKill)),
	waits("openssl-enc", "openssl", "password", files, `openssl enc -aes-256-cbc -pbkdf2 -in a.txt -out a.enc`),
	waits("openssl-pkcs12", "openssl", "password", `openssl req -x509 -newkey ed25519 -nodes -keyout k.pem -out c.pem -subj /CN=capture -days 1 2>/dev/null`, `openssl pkcs12 -export -inkey k.pem -in c.pem -out c.p12`),
	waits("openssl-passwd", "openssl", "password", ``, `openssl passwd -6`),
	exits("openssl-x509-text", "openssl", `openssl req -x509 -newkey ed25519 -nodes -keyout k.pem -out c.pem -subj /CN=capture -days 1 2>/dev/null`, `openssl x509 -in c.pem -noout -subject -issuer -ext basicConstraints`),
	waits("htpasswd-new", "htpasswd", "password", ``, `htpasswd -c .htpasswd alice`),
	waits("mkpasswd-prompt", "mkpasswd", "password", ``, `mkpasswd`),
	waits("su-root", "su", "password", ``, `runuser -u nobody -- su root -c true`),
	waits("sudo-password", "sudo", "password", ``, `runuser -u nobody -- sudo -k true`),
	waits("passwd-current", "passwd", "password", ``, `runuser -u nobody -- passwd`),
	waits("chfn-full-name", "chfn", "text", ``, `chfn nobody`),
	waits("chsh-shell", "chsh", "path", ``, `chsh nobody`),
	slow(after(waits("pass-insert", "pass", "password", gpgKey+` && GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store pass init dev@example.com >/dev/null`, `GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store pass insert web/example`), gpgKill)),
	waits("ssh-add-passphrase", "ssh-add", "password", `ssh-keygen -q -t ed25519 -N throwaway -C capture -f key`, `ssh-agent bash -c 'ssh-add key'`),
	waits("ssh-keygen-old-passphrase", "ssh-keygen", "password", `ssh-keygen -q -t ed25519 -N throwaway -C capture -f key`, `ssh-keygen -p -f key`),
	exits("ssh-keygen-fingerprint", "ssh-keygen", `ssh-keygen -q -t ed25519 -N '' -C capture -f key`, `ssh-keygen -l -f key.pub`),
	exits("ssh-agent-foreground", "ssh-agent", ``, `ssh-agent -d -a $PWD/agent.sock`),
	waits("python3-getpass-token", "python3", "password", ``, `python3 -c 'import getpass; getpass.getpass("API token: ")'`),
	waits("node-secret-key", "node", "password", ``, `node -e 'require("readline").createInterface({input: process.stdin, output: process.stdout}).question("Secret access key: ", () => {})'`),
	waits("bash-otp", "bash", "password", ``, `bash -c 'read -p "Enter the 6-digit code from your authenticator app: " c'`),
}

var packageScenarios = []scenario{
	serially(risky("apt-get-remove", "apt-get", "yes_no", "the default, Y, removes the package", aptParts, `apt-get -o Dir::Etc::SourceParts=$PWD/parts remove nano`)),
	serially(risky("apt-remove", "apt", "yes_no", "the default, Y, removes the package", aptParts, `apt -o Dir::Etc::SourceParts=$PWD/parts remove joe`)),
	serially(risky("aptitude-remove", "aptitude", "yes_no", "the default, Y, removes the package", aptParts, `aptitude -o Dir::Etc::SourceParts=$PWD/parts remove jed`)),
	serially(slow(waits("apt-get-install", "apt-get", "yes_no", aptParts, `apt-get -o Dir::Etc::SourceParts=$PWD/parts install --no-install-recommends cowsay`))),
	serially(exits("apt-get-already", "apt-get", aptParts, `apt-get -o Dir::Etc::SourceParts=$PWD/parts install nano`)),
	exits("apt-cache-policy", "apt-cache", aptParts, `apt-cache -o Dir::Etc::SourceParts=$PWD/parts policy nano`),
	serially(risky("dpkg-conffile", "dpkg", "choice", "Y or I replaces the locally modified configuration file with the package's version", dpkgConffile, `dpkg --admindir=$PWD/admin --instdir=$PWD/root --force-not-root --force-script-chrootless -i capture-demo_2.deb`)),
	exits("dpkg-list", "dpkg", ``, `dpkg -l nano`),
	exits("dpkg-deb-build", "dpkg-deb", `mkdir -p pkg/DEBIAN && printf 'Package: capture-demo\nVersion: 1\nArchitecture: all\nMaintainer: Dev <dev@example.com>\nDescription: demo\n' > pkg/DEBIAN/control`, `dpkg-deb --build pkg demo.deb`),
	risky("pip-uninstall", "pip", "yes_no", "the default, Y, uninstalls the package", venv, `v/bin/pip uninstall pip`),
	exits("pip-externally-managed", "pip", ``, `/usr/bin/python3 -m pip install requests`),
	exits("pip-list", "pip", venv, `v/bin/pip list`),
	waits("npm-init", "npm", "text", ``, `npm init`),
	waits("npx-install", "npx", "yes_no", ``, `npx cowsay hello`),
	exits("npm-ls", "npm", `printf '{"name":"demo","version":"1.0.0"}\n' > package.json`, `npm ls`),
	waits("cpan-first-run", "cpan", "yes_no", ``, `cpan`),
	waits("select-editor", "select-editor", "choice", ``, `select-editor`),
	waits("update-alternatives-editor", "update-alternatives", "choice", ``, `update-alternatives --config editor`),
	exits("gem-list", "gem", ``, `gem list --local | head -n 8`),
}

// dpkgConffile installs version 1 of a demo package into a private dpkg
// database and root under the scratch dir, edits its conffile and builds
// version 2, so installing it asks what to do with the conffile.
const dpkgConffile = `mkdir -p admin/updates admin/info root && touch admin/status admin/available && ` +
	`for v in 1 2; do mkdir -p p$v/DEBIAN p$v/etc && printf "setting=$v\n" > p$v/etc/capture-demo.conf && echo /etc/capture-demo.conf > p$v/DEBIAN/conffiles && ` +
	`printf "Package: capture-demo\nVersion: $v\nArchitecture: all\nMaintainer: Dev <dev@example.com>\nDescription: demo\n" > p$v/DEBIAN/control && dpkg-deb --build p$v capture-demo_$v.deb >/dev/null; done && ` +
	`dpkg --admindir=$PWD/admin --instdir=$PWD/root --force-not-root --force-script-chrootless -i capture-demo_1.deb >/dev/null 2>&1 && echo local=1 >> root/etc/capture-demo.conf`

var menuScenarios = []scenario{
	risky("dialog-yesno-delete", "dialog", "yes_no", "Yes deletes every snapshot of the volume", ``, `dialog --yesno "Delete all 14 snapshots of volume data?" 7 50`),
	waits("dialog-inputbox", "dialog", "text", ``, `dialog --inputbox "Hostname for this machine:" 8 50`),
	waits("dialog-fselect", "dialog", "path", files, `dialog --fselect ./ 12 60`),
	waits("whiptail-menu", "whiptail", "choice", ``, `whiptail --menu "Default locale for the system environment:" 15 60 4 en_US.UTF-8 "" de_DE.UTF-8 "" fr_FR.UTF-8 "" None ""`),
	waits("whiptail-yesno", "whiptail", "yes_no", ``, `whiptail --yesno "Enable automatic security updates?" 8 50`),
	waits("whiptail-password", "whiptail", "password", ``, `whiptail --passwordbox "Password for the database administrative user:" 8 60`),
	waits("whiptail-checklist", "whiptail", "choice", ``, `whiptail --checklist "Software to install:" 15 60 4 ssh "SSH server" ON web "web server" OFF print "print server" OFF mail "mail server" OFF`),
}

var quietScenarios = []scenario{
	exits("gcc-error", "gcc", `printf 'int main(void) { return undefined_name; }\n' > m.c`, `gcc m.c`),
	exits("go-build-error", "go", `printf 'package main\nfunc main() { delete() }\n' > m.go`, `GOCACHE=/root/.cache/go-build go build m.go`),
	exits("rustc-error", "rustc", `printf 'fn main() { let x: i32 = "yes"; }\n' > m.rs`, `RUSTUP_HOME=/root/.rustup rustc m.rs`),
	exits("javac-error", "javac", `printf 'class M { void f() { int x = "password"; } }\n' > M.java`, `javac M.java`),
	exits("make-no-target", "make", ``, `make install`),
	exits("make-recipe", "make", `printf 'all:\n\t@echo "Removing old build..."\n\t@echo "Are all tests green? yes"\n\t@echo "Build finished."\n' > Makefile`, `make`),
	exits("grep-password-config", "grep", `mkdir conf && printf 'db_host=127.0.0.1\n# password: set via environment\nadmin_password_min_length=12\n' > conf/app.ini`, `grep -rn password conf`),
	exits("cat-install-log", "cat", `printf '[10:00:01] Enter password: prompt skipped (non-interactive)\n[10:00:02] Do you want to continue? [Y/n] Y\n[10:00:05] Removing old files... done\n[10:00:06] Install complete.\n' > install.log`, `cat install.log`),
	exits("tail-follow", "tail", `printf '2026-01-01 10:00:00 INFO worker ready\n2026-01-01 10:00:01 WARN delete queue backlog: 42\n' > app.log`, `tail -f app.log`),
	exits("head-lines", "head", ``, `head -n 5 /etc/services`),
	exits("sort-uniq", "sort", `printf 'delete\nkeep\ndelete\nmove\n' > ops.txt`, `sort ops.txt | uniq -c`),
	exits("wc-count", "wc", files, `wc a.txt b.txt`),
	exits("seq-numbers", "seq", ``, `seq 1 12`),
	exits("yes-head", "yes", ``, `yes | head -n 3`),
	exits("date-utc", "date", ``, `date -u -d @1767225600`),
	exits("base64-encode", "base64", files, `base64 a.txt`),
	exits("xxd-dump", "xxd", files, `xxd a.txt`),
	exits("od-dump", "od", files, `od -c a.txt`),
	exits("hexdump-canonical", "hexdump", files, `hexdump -C a.txt`),
	exits("cmp-differ", "cmp", files, `cmp a.txt b.txt`),
	exits("column-table", "column", `printf 'name size state\ndisk.img 64M clean\nold.img 32M dirty\n' > t.txt`, `column -t t.txt`),
	exits("jq-pretty", "jq", `printf '{"confirm":false,"question":"Delete?","answer":"no"}\n' > q.json`, `jq . q.json`),
	exits("awk-report", "awk", `printf 'a 1\nb 2\n' > t.txt`, `awk '{ s += $2 } END { print "Continue? total:", s }' t.txt`),
	exits("sed-replace", "sed", files, `sed 's/hello/Password: hunter-not-real/' a.txt`),
	exits("printf-answered-prompt", "printf", ``, `printf 'Overwrite existing config? [y/N] n\nKeeping the existing config.\n'`),
	exits("sleep-after-message", "sleep", ``, `echo "Waiting for the lock on /var/lib/dpkg/lock (held by another process)..."; sleep 20`),
	exits("timeout-expired", "timeout", ``, `timeout 1 sleep 5; echo "exit status $?"`),
	exits("factor-numbers", "factor", ``, `factor 1234567 9876543`),
	exits("expr-eval", "expr", ``, `expr 6 \* 7`),
	exits("numfmt-sizes", "numfmt", ``, `numfmt --to=iec 1048576 73741824`),
	exits("nl-numbered", "nl", files, `nl a.txt b.txt`),
	exits("tac-reverse", "tac", `printf 'first\nsecond\nthird?\n' > t.txt`, `tac t.txt`),
	exits("id-user", "id", ``, `runuser -u nobody -- id`),
	exits("sqlite3-dump", "sqlite3", `sqlite3 app.db "create table users(name text, password_hash text); insert into users values ('alice','x');"`, `sqlite3 app.db .dump`),
	exits("lua-error", "lua5.4", ``, `lua5.4 -e 'error("refusing to delete: are you sure?")'`),
	exits("php-lint", "php", `printf '<?php echo "Proceed? (y/n)"; ?>\n' > a.php`, `php -l a.php`),
	exits("tclsh-script", "tclsh", `printf 'puts "Password: ********"\nputs "Login ok."\n' > a.tcl`, `tclsh a.tcl`),
	exits("hg-version", "hg", ``, `hg version -q`),
	exits("node-version", "node", ``, `node --version`),
	exits("env-free-ls", "ls", files, `ls -1`),
	exits("realpath-path", "realpath", files, `realpath a.txt`),
	exits("fold-wrap", "fold", ``, `echo "Are you sure you want to remove all build artifacts? This message is only a log line that wraps." | fold -w 40`),
	exits("comm-compare", "comm", `printf 'a\nb\n' > x && printf 'b\nc\n' > y`, `comm x y`),
	exits("cut-fields", "cut", ``, `printf 'user:password:uid\nalice:x:1000\n' | cut -d: -f1,3`),
	exits("tr-upper", "tr", ``, `echo "delete? no" | tr a-z A-Z`),
}

// Added in the second round of captures (issue 14): programs the corpus
// did not have, chosen by family before any was run (more disk checkers
// and formatters, archive tools, database and key tools, REPLs, silent
// readers), labelled from what the program is documented to ask.
var (
	diskScenarios2 = []scenario{
		risky("mkreiserfs-existing", "mkreiserfs", "yes_no", "y formats the image, destroying the filesystem on it", `truncate -s 64M disk.img && mkreiserfs -q -f disk.img >/dev/null 2>&1`, `mkreiserfs -f disk.img`),
		risky("reiserfsck-rebuild", "reiserfsck", "yes_no", "typing Yes rebuilds the tree in place, which can lose files", `truncate -s 64M disk.img && mkreiserfs -q -f disk.img >/dev/null 2>&1`, `reiserfsck --rebuild-tree disk.img`),
		exits("reiserfsck-check", "reiserfsck", `truncate -s 64M disk.img && mkreiserfs -q -f disk.img >/dev/null 2>&1`, `reiserfsck --check --yes disk.img`),
		risky("mkfs-jfs-image", "mkfs.jfs", "yes_no", "y formats the image", blankImage, `mkfs.jfs disk.img`),
		exits("mkfs-jfs-quiet", "mkfs.jfs", blankImage, `mkfs.jfs -q disk.img`),
		// Warns and counts down instead of asking: running, not waiting.
		exits("btrfs-check-repair", "btrfs", `truncate -s 128M disk.img && mkfs.btrfs -q disk.img`, `btrfs check --repair disk.img`),
		exits("btrfs-check", "btrfs", `truncate -s 128M disk.img && mkfs.btrfs -q disk.img`, `btrfs check disk.img`),
	}
	archiveScenarios2 = []scenario{
		// Refuses instead of asking.
		exits("lzop-exists", "lzop", files+` && lzop a.txt`, `lzop -d a.txt.lzo`),
		exits("lzop-test", "lzop", files+` && lzop a.txt`, `lzop -t a.txt.lzo`),
		risky("pigz-overwrite", "pigz", "yes_no", "y overwrites a.txt with the decompressed copy", files+` && pigz -k a.txt`, `pigz -d -k a.txt.gz`),
		exits("pigz-list", "pigz", files+` && pigz -k a.txt`, `pigz -l a.txt.gz`),
		exits("brotli-exists", "brotli", files+` && brotli -k a.txt`, `brotli -d a.txt.br`),
	}
	fileScenarios2 = []scenario{
		risky("rm-recursive-once", "rm", "yes_no", "y deletes the directory and everything in it", `mkdir -p d/e && touch d/x d/e/y`, `rm -I -r d`),
		risky("parallel-interactive", "parallel", "yes_no", "y runs rm on a.txt", files, `parallel -p rm ::: a.txt`),
		exits("trash-list", "trash-list", files+` && trash-put a.txt`, `trash-list`),
		after(risky("crontab-remove", "crontab", "yes_no", "y deletes the user's crontab", `printf '0 * * * * true\n' | crontab -u nobody -`, `crontab -u nobody -ri`), `crontab -u nobody -r`),
		exits("crontab-list-none", "crontab", ``, `crontab -u daemon -l`),
	}
	vcsScenarios2 = []scenario{
		risky("brz-uncommit", "brz", "yes_no", "y removes the last commit from the branch", `brz init -q r && cd r && brz whoami 'Dev <dev@example.com>' && printf 'one\n' > a.txt && brz add -q a.txt && brz commit -q -m init`, `cd r && brz uncommit`),
		waits("brz-shelve", "brz", "choice", `brz init -q r && cd r && brz whoami 'Dev <dev@example.com>' && printf 'one\n' > a.txt && brz add -q a.txt && brz commit -q -m init && printf 'two\n' > a.txt`, `cd r && brz shelve`),
		exits("brz-status", "brz", `brz init -q r && cd r && printf 'one\n' > a.txt`, `cd r && brz status`),
	}
	secretScenarios2 = []scenario{
		risky("keytool-trust", "keytool", "yes_no", "yes makes Java trust a certificate nobody has checked", `openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 -subj /CN=capture.local 2>/dev/null`, `keytool -importcert -file c.pem -keystore ks.p12 -storepass changeit -alias capture`),
		slow(waits("keytool-storepass", "keytool", "password", `openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 -subj /CN=capture.local 2>/dev/null && keytool -importcert -noprompt -file c.pem -keystore ks.p12 -storepass changeit -alias capture >/dev/null 2>&1`, `keytool -list -keystore ks.p12`)),
		risky("dropdb-ask", "dropdb", "yes_no", "y drops the database", ``, `dropdb -i -h 127.0.0.1 -p 1 analytics`),
		risky("dropuser-ask", "dropuser", "yes_no", "y drops the role", ``, `dropuser -i -h 127.0.0.1 -p 1 alice`),
		exits("dropdb-refused", "dropdb", ``, `dropdb -h 127.0.0.1 -p 1 -w analytics`),
	}
	replScenarios2 = []scenario{
		waits("gp-repl", "gp", "command", ``, `gp -q`),
		exits("gp-script", "gp", ``, `echo '2^64' | gp -q`),
		waits("calc-repl", "calc", "command", ``, `calc`),
		exits("calc-expression", "calc", ``, `calc '2^64'`),
	}
	quietScenarios2 = []scenario{
		waits("sort-stdin", "sort", "text", ``, `sort`),
		waits("tee-stdin", "tee", "text", ``, `tee out.txt`),
		waits("wc-stdin", "wc", "text", ``, `wc -l`),
		exits("sort-file", "sort", files, `sort a.txt b.txt`),
	}
)
