package main

// The fourth round of captures (issue 24, continued): more programs of the
// families the leave-one-family-out figures found weak (archivers, editors,
// package tools, version control, network clients, disk tools, credential
// stores, file tools, menus, shells), installed from Debian 12 and captured
// before any rule or model looked at them; labelled by the rules of
// terminal/testdata/corpus/README.md ("Round four"). Breadth of programs
// over screens per program: most programs here are new to the corpus.

// Setups of round four.
const (
	// mbox4 is a mailbox with one message, for the mail readers.
	mbox4 = `printf 'From dev@example.com Thu Jan  1 00:00:00 2026\nFrom: dev@example.com\nTo: root@example.com\nSubject: hello\nDate: Thu, 1 Jan 2026 00:00:00 +0000\n\nbody\n\n' > mbox && chmod 600 mbox`
	// gptImage is an image with a GPT of one partition.
	gptImage = `truncate -s 64M disk.img && printf 'label: gpt\n,16M\n' | sfdisk -q disk.img`
	// ntfsImage is an image with an NTFS filesystem.
	ntfsImage = `truncate -s 64M disk.img && mkntfs -F -Q -q disk.img`
	// darcsRecorded is a darcs repository with one recorded patch.
	darcsRecorded = `mkdir r && cd r && darcs init -q && printf 'one\n' > a.txt && darcs add -q a.txt && darcs record -q -a --author dev@example.com -m init`
	// gemVersions installs two versions of a local demo gem into ./gems.
	gemVersions = `for v in 1.0 2.0; do printf 'Gem::Specification.new { |s| s.name = "capdemo"; s.version = "%s"; s.summary = "demo"; s.authors = ["Dev"]; s.files = [] }\n' $v > capdemo.gemspec && gem build -q capdemo.gemspec >/dev/null 2>&1 && gem install -q --local --no-document --install-dir $PWD/gems capdemo-$v.gem >/dev/null 2>&1; done`
	// ucfModified is a configuration file registered with ucf (in a
	// private state dir), edited locally, with a new version shipped.
	ucfModified = `mkdir -p st etc && printf 'v=1\n' > new.conf && ucf --state-dir $PWD/st new.conf $PWD/etc/demo.conf >/dev/null 2>&1 && printf 'local=1\n' >> etc/demo.conf && printf 'v=2\n' > new.conf`
	// coverWav is a short silent WAV file with a.txt hidden in it.
	coverWav = files + ` && python3 -c 'import wave; w = wave.open("cover.wav", "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000); w.writeframes(bytes(64000)); w.close()' && steghide embed -q -cf cover.wav -ef a.txt -p throwaway`
	// nssP12 is an empty NSS database and a PKCS#12 file to import.
	nssP12 = `mkdir nssdb && certutil -N -d sql:nssdb --empty-password && openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 -subj /CN=capture.local 2>/dev/null && openssl pkcs12 -export -in c.pem -inkey k.pem -out c.p12 -passout pass:throwaway`
)

var round4 = concat(
	family("archive", []scenario{
		risky("arc-overwrite", "arc", "yes_no", "y extracts over the existing a.txt", files+` && arc a a.arc a.txt >/dev/null`, `arc x a.arc`),
		exits("nomarch-extract", "nomarch", files+` && arc a a.arc a.txt >/dev/null`, `nomarch a.arc`),
		waits("dtrx-one-file", "dtrx", "choice", files+` && tar -cf a.tar a.txt`, `dtrx a.tar`),
		exits("aunpack-exists", "aunpack", files+` && zip -q a.zip a.txt`, `aunpack a.zip`),
		exits("zpaq-exists", "zpaq", files+` && zpaq a a.zpaq a.txt >/dev/null 2>&1`, `zpaq x a.zpaq`),
		exits("rzip-exists", "rzip", files+` && rzip -k a.txt`, `rzip -k a.txt`),
		exits("pbzip2-exists", "pbzip2", files+` && pbzip2 -k a.txt`, `pbzip2 -k a.txt`),
		exits("plzip-exists", "plzip", files+` && plzip -k a.txt`, `plzip -k a.txt`),
		exits("lbzip2-exists", "lbzip2", files+` && lbzip2 -k a.txt`, `lbzip2 -k a.txt`),
		exits("ar-extract", "ar", files+` && ar rc a.a a.txt`, `ar xv a.a`),
		risky("steghide-overwrite", "steghide", "yes_no", "y writes the hidden file over the existing a.txt", coverWav, `steghide extract -sf cover.wav -p throwaway`),
		risky("dar-create-overwrite", "dar", "yes_no", "return (yes) overwrites the existing archive slice", files+` && dar -Q -c a -R . -g a.txt >/dev/null 2>&1`, `dar -c a -R . -g a.txt`),
	}),
	family("editor", []scenario{
		typing(waits("vis-quit-modified", "vis", "command", files, `vis a.txt`), "ix", "\x1b", ":q\r"),
		typing(waits("elvis-tiny-quit-modified", "elvis-tiny", "command", files, `elvis-tiny a.txt`), "ix", "\x1b", ":q\r"),
		typing(waits("levee-quit-modified", "levee", "command", files, `levee a.txt`), "ix", "\x1b", ":q\r"),
		waits("bvi-file", "bvi", "command", files, `bvi a.txt`),
		typing(waits("hexedit-quit-modified", "hexedit", "choice", files, `hexedit a.txt`), "41", "\x18"),
		typing(waits("le-quit-modified", "le", "choice", files, `le a.txt`), editKeys, "\x18"),
		typing(risky("jupp-quit-modified", "jupp", "yes_no", "y leaves the file, losing its changes", files, `jupp a.txt`), editKeys, "\x0bq"),
		exits("edbrowse-first-run", "edbrowse", files, `edbrowse a.txt`),
		typing(waits("edbrowse-quit-modified", "edbrowse", "command", files+` && edbrowse </dev/null >/dev/null 2>&1; true`, `edbrowse a.txt`), "a\rx\r.\r", "q\r"),
		typing(waits("jed-quit-modified", "jed", "yes_no", files, `jed a.txt`), editKeys, "\x18\x03"),
		typing(risky("ne-quit-modified", "ne", "yes_no", "y quits, losing the unsaved changes", files, `ne a.txt`), editKeys, "\x11"),
		typing(waits("mcedit-quit-modified", "mcedit", "choice", files, `mcedit a.txt`), editKeys, "\x1b0"),
	}),
	family("package", []scenario{
		risky("ucf-conffile", "ucf", "choice", "Y or I replaces the locally modified configuration file with the new version", ucfModified, `ucf --state-dir $PWD/st new.conf $PWD/etc/demo.conf`),
		exits("opam-init-fetch", "opam", ``, `opam init --bare -n`),
		risky("gem-uninstall-choice", "gem", "choice", "every choice uninstalls a version of the gem; 3 removes them all", gemVersions, `GEM_HOME=$PWD/gems GEM_PATH=$PWD/gems gem uninstall capdemo`),
		serially(waits("dselect-menu", "dselect", "choice", ``, `dselect`)),
		exits("dpkg-purge-private", "dpkg", dpkgConffile, `dpkg --admindir=$PWD/admin --instdir=$PWD/root --force-not-root --force-script-chrootless --purge capture-demo`),
	}),
	family("vcs", []scenario{
		risky("hg-purge", "hg", "yes_no", "y permanently deletes the untracked files", `hg init r && cd r && printf 'x\n' > junk.tmp`, `cd r && hg purge`),
		risky("darcs-obliterate", "darcs", "choice", "y removes the patch and its changes from the repository and the working tree", darcsRecorded, `cd r && darcs obliterate`),
		waits("darcs-unrecord", "darcs", "choice", darcsRecorded, `cd r && darcs unrecord`),
		waits("git-difftool", "git", "yes_no", gitRepo, `cd r && git difftool --tool=vimdiff`),
		waits("git-am-interactive", "git", "choice", gitRepo+` && git commit -qam two && git format-patch -q -1 -o p && git reset -q --hard HEAD~1`, `cd r && git am -i p/*.patch`),
		waits("git-rebase-editor", "git", "command", gitRepo+` && git commit -qam two && printf 'eight\n' >> a.txt && git commit -qam three`, `cd r && git -c core.editor=vim rebase -i HEAD~2`),
		waits("sdiff-merge", "sdiff", "command", files, `sdiff -o merged.txt a.txt b.txt`),
		exits("quilt-pop", "quilt", `mkdir q && cd q && printf 'x\n' > a.txt && quilt new p.diff >/dev/null && quilt add a.txt >/dev/null && printf 'y\n' > a.txt && quilt refresh >/dev/null`, `cd q && quilt pop`),
	}),
	family("network", []scenario{
		risky("plink-host-key", "plink", "yes_no", "y stores a host key nobody has checked, for good", sshServer(47040), `plink -P 47040 root@127.0.0.1`),
		risky("pscp-host-key", "pscp", "yes_no", "y stores a host key nobody has checked, for good", sshServer(47041), `pscp -P 47041 root@127.0.0.1:/etc/hostname .`),
		risky("psftp-host-key", "psftp", "yes_no", "y stores a host key nobody has checked, for good", sshServer(47042), `psftp -P 47042 root@127.0.0.1`),
		risky("ssh-copy-id-host-key", "ssh-copy-id", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47043)+` && mkdir -m 700 .ssh && ssh-keygen -q -t ed25519 -N '' -f k`, `ssh-copy-id -f -i k.pub -o UserKnownHostsFile=$PWD/known_hosts -o PubkeyAuthentication=no -p 47043 root@127.0.0.1`),
		waits("s-nail-mbox", "s-nail", "command", mbox4, `s-nail -n -f mbox`),
		waits("bsd-mailx-mbox", "bsd-mailx", "command", mbox4, `bsd-mailx -n -f mbox`),
		exits("alpine-first-run", "alpine", ``, `alpine -p $PWD/pinerc`),
		typing(risky("neomutt-purge", "neomutt", "yes_no", "yes purges the message marked deleted from the mailbox", mbox4+` && mkdir Mail`, `neomutt -n -F /dev/null -f mbox`), "d", "q"),
	}),
	family("pager", []scenario{
		typing(risky("mutt-purge", "mutt", "yes_no", "yes purges the message marked deleted from the mailbox", mbox4+` && mkdir Mail`, `mutt -n -F /dev/null -f mbox`), "d", "q"),
	}),
	family("disk", []scenario{
		risky("cgdisk-table", "cgdisk", "command", "cgdisk's Delete and Write change the image's partition table", gptImage, `cgdisk disk.img`),
		risky("fixparts-shell", "fixparts", "command", "fixparts rewrites the image's MBR partition table when its w command is given", dosImage, `fixparts disk.img`),
		risky("ntfsresize-shrink", "ntfsresize", "yes_no", "y shrinks the NTFS filesystem of the image", ntfsImage, `ntfsresize -s 40M disk.img`),
		risky("integritysetup-format", "integritysetup", "yes_no", "YES overwrites the image with a new integrity superblock", `truncate -s 32M disk.img`, `integritysetup format disk.img`),
		risky("mmove-clash", "mmove", "choice", "o or O overwrites b.txt inside the FAT image", fatImage+` && mcopy -i fat.img b.txt ::b.txt`, `mmove -i fat.img ::a.txt ::b.txt`),
		exits("sgdisk-zap", "sgdisk", dosImage, `sgdisk --zap-all disk.img`),
		exits("badblocks-write", "badblocks", `truncate -s 16M disk.img`, `badblocks -w -s disk.img`),
		waits("photorec-media", "photorec", "choice", dosImage, `photorec disk.img`),
		typing(risky("gdisk-new-table", "gdisk", "yes_no", "Y deletes every partition of the image's table", dosImage, `gdisk disk.img`), "o\r"),
	}),
	family("credential", []scenario{
		slow(after(risky("gopass-rm", "gopass", "yes_no", "y deletes the stored password", passStore, `GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store gopass rm web/example`), gpgKill)),
		slow(after(risky("pass-insert-exists", "pass", "yes_no", "y overwrites the stored password", passStore, `GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store pass insert web/example`), gpgKill)),
		slow(after(risky("gpg-delete-secret", "gpg", "yes_no", "y deletes the secret key from the keyring", gpgKey, `GNUPGHOME=$PWD/g gpg --delete-secret-keys dev@example.com`), gpgKill)),
		waits("scrypt-encrypt", "scrypt", "password", files, `scrypt enc a.txt a.enc`),
		waits("certtool-self-signed", "certtool", "text", `certtool --generate-privkey --outfile k.pem >/dev/null 2>&1`, `certtool --generate-self-signed --load-privkey k.pem --outfile c.pem`),
		waits("pk12util-import", "pk12util", "password", nssP12, `pk12util -i c.p12 -d sql:nssdb`),
		slow(after(waits("gpg-connect-agent", "gpg-connect-agent", "command", gnupg, `GNUPGHOME=$PWD/g gpg-connect-agent`), gpgKill)),
	}),
	family("file", []scenario{
		risky("fdupes-delete-plain", "fdupes", "choice", "the files not chosen to be kept are deleted", files+` && cp a.txt c.txt`, `fdupes -d -P .`),
		risky("fdupes-delete-screen", "fdupes", "choice", "the files not chosen to be kept are deleted", files+` && cp a.txt c.txt`, `fdupes -d .`),
		risky("jdupes-delete", "jdupes", "choice", "the files not chosen to be kept are deleted", files+` && cp a.txt c.txt`, `jdupes -d .`),
		risky("mmv-clash", "mmv", "yes_no", "y deletes the existing b.txt to move a.txt over it", files, `mmv a.txt b.txt`),
		risky("wipe-file", "wipe", "yes_no", "yes overwrites a.txt many times and deletes it", files, `wipe a.txt`),
		waits("imv-rename", "imv", "path", files, `imv a.txt`),
	}),
	family("menu", []scenario{
		waits("tzselect-continent", "tzselect", "choice", ``, `tzselect`),
		waits("fzf-pick", "fzf", "choice", ``, `printf 'alpha\nbeta\ngamma\n' | fzf`),
		waits("iselect-pick", "iselect", "choice", ``, `iselect -a alpha beta gamma`),
		waits("smenu-pick", "smenu", "choice", ``, `echo alpha beta gamma | smenu`),
		risky("whiptail-yesno-reformat", "whiptail", "yes_no", "Yes reformats the drive, losing every file on it", ``, `whiptail --yesno "Reformat the USB drive /dev/sdb1? All files on it will be lost." 8 60`),
	}),
	family("shell", []scenario{
		waits("posh-shell", "posh", "command", ``, `posh`),
		waits("elvish-shell", "elvish", "command", ``, `elvish`),
		slow(waits("xonsh-shell", "xonsh", "command", ``, `xonsh --no-rc`)),
		waits("sash-shell", "sash", "command", ``, `sash`),
		typing(waits("bash-list-many", "bash", "yes_no", ``, `env PS1='$ ' bash --norc -i`), "ls /usr/bin/\t\t"),
	}),
)
