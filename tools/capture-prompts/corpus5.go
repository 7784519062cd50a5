package main

// The fifth round of captures (issue 24, continued): after round four's
// dev-half misses were worked on, more programs and questions of the
// families still below target by their per-family figures (package tools,
// archivers, version control, menus and editors by type, file managers'
// delete questions, tools that run ssh for you), captured and labelled
// before the detector saw them, as round four was (README, "Round five").

// Setups of round five.
const (
	// demoDeb is a demo package file, built but not installed.
	demoDeb = `mkdir -p p/DEBIAN && printf "Package: capture-demo\nVersion: 1\nArchitecture: all\nMaintainer: Dev <dev@example.com>\nDescription: demo\n" > p/DEBIAN/control && dpkg-deb --build p capture-demo_1.deb >/dev/null`
	// sshCmd is ssh kept away from this machine's config, keys and known
	// hosts, for programs that run ssh for you.
	sshCmd = `ssh ` + sshOpts
)

var round5 = concat(
	family("package", []scenario{
		serially(patient(risky("apt-get-purge", "apt-get", "yes_no", "the default, Y, removes the package and its configuration files", aptParts, `apt-get -o Dir::Etc::SourceParts=$PWD/parts purge nano`))),
		serially(patient(waits("gdebi-install", "gdebi", "yes_no", demoDeb, `gdebi capture-demo_1.deb`))),
	}),
	family("archive", []scenario{
		risky("dar-extract-overwrite", "dar", "yes_no", "return (yes) extracts over the existing a.txt", files+` && dar -Q -c a -R . -g a.txt >/dev/null 2>&1`, `dar -x a -R .`),
		risky("rsync-ssh-host-key", "rsync", "yes_no", "yes trusts a host key nobody has checked, for good", files+` && `+sshServer(47050), `rsync -e "`+sshCmd+` -p 47050" a.txt root@127.0.0.1:/tmp/`),
	}),
	family("vcs", []scenario{
		risky("git-clone-ssh-host-key", "git", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47051), `GIT_SSH_COMMAND="`+sshCmd+`" git clone ssh://root@127.0.0.1:47051/srv/r.git`),
		risky("hg-clone-ssh-host-key", "hg", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47052), `hg clone --ssh "`+sshCmd+`" ssh://root@127.0.0.1:47052/r`),
		risky("fossil-clean-prompt", "fossil", "choice", "y or a deletes the untracked files", fossilCo+` && touch junk.tmp`, `cd w && fossil clean --prompt`),
		waits("cvs-release", "cvs", "yes_no", cvsCo, `export CVSROOT=$PWD/cvsroot && cvs release w`),
		risky("brz-clean-tree", "brz", "yes_no", "y deletes the unknown files", `brz init -q r && cd r && touch junk.tmp`, `cd r && brz clean-tree`),
		waits("darcs-amend", "darcs", "choice", darcsRecorded+` && printf 'two\n' >> a.txt`, `cd r && darcs amend`),
	}),
	family("network", []scenario{
		risky("mosh-host-key", "mosh", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47053), `mosh --ssh="`+sshCmd+` -p 47053" root@127.0.0.1`),
		risky("autossh-host-key", "autossh", "yes_no", "yes trusts a host key nobody has checked, for good", sshServer(47054), `AUTOSSH_GATETIME=0 autossh -M 0 `+sshOpts+` -p 47054 root@127.0.0.1`),
	}),
	family("menu", []scenario{
		waits("dialog-checklist", "dialog", "choice", ``, `dialog --checklist "Components to install:" 12 50 3 docs "" on tests "" off examples "" off`),
		waits("whiptail-radiolist", "whiptail", "choice", ``, `whiptail --radiolist "Default shell:" 12 50 3 bash "" on zsh "" off fish "" off`),
		risky("whiptail-menu-erase", "whiptail", "choice", "the default item erases the disk", ``, `whiptail --menu "Action for /dev/sdb:" 12 60 3 erase "Erase the disk and install" keep "Keep the partitions" cancel "Do nothing"`),
		waits("dialog-passwordbox", "dialog", "password", ``, `dialog --passwordbox "Password for the backup key:" 8 50`),
		waits("fzy-pick", "fzy", "choice", ``, `printf 'alpha\nbeta\ngamma\n' | fzy`),
		waits("pick-pick", "pick", "choice", ``, `printf 'alpha\nbeta\ngamma\n' | pick`),
	}),
	family("shell", []scenario{
		typing(waits("zsh-select", "zsh", "choice", ``, `zsh -f`), "select f in apple pear plum; do break; done\r"),
		typing(waits("ksh-select", "ksh", "choice", ``, `ksh`), "select f in apple pear plum; do break; done\r"),
	}),
	family("editor", []scenario{
		typing(waits("jpico-quit-modified", "jpico", "yes_no", files, `jpico a.txt`), editKeys, "\x18"),
		typing(waits("jmacs-quit-modified", "jmacs", "yes_no", files, `jmacs a.txt`), editKeys, "\x18\x03"),
		typing(waits("tweak-quit-modified", "tweak", "yes_no", files, `tweak a.txt`), "41", "\x18\x03"),
		typing(waits("mle-quit-modified", "mle", "text", files, `mle a.txt`), editKeys, "\x11"),
	}),
	family("file", []scenario{
		waits("icp-copy", "icp", "path", files, `icp a.txt`),
		waits("vidir-editor", "vidir", "command", files, `EDITOR=vim vidir`),
	}),
	family("pager", []scenario{
		typing(risky("ncdu-delete", "ncdu", "choice", "yes deletes the file under the cursor", files, `ncdu`), "d"),
		slow(typing(waits("ranger-delete", "ranger", "command", files, `ranger`), ":delete\r")),
		typing(risky("nnn-delete", "nnn", "yes_no", "y deletes the file under the cursor", files, `nnn`), "x"),
		typing(risky("lf-delete", "lf", "yes_no", "y deletes the file under the cursor", files, `lf`), ":delete\r"),
	}),
	family("credential", []scenario{
		risky("ccrypt-overwrite", "ccrypt", "yes_no", "y overwrites the existing a.txt.cpt", files+` && cp a.txt c.txt && ccrypt -e -K throwaway c.txt && mv c.txt.cpt a.txt.cpt`, `ccrypt -e -K throwaway a.txt`),
		waits("chage-user", "chage", "text", ``, `chage nobody`),
		waits("gpasswd-group", "gpasswd", "password", ``, `gpasswd nogroup`),
		waits("htdigest-new", "htdigest", "password", ``, `htdigest -c digest.txt capture dev`),
		slow(after(risky("gopass-insert-exists", "gopass", "yes_no", "y overwrites the stored password", passStore, `GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store gopass insert web/example`), gpgKill)),
		slow(after(waits("gpg-gen-revoke", "gpg", "yes_no", gpgKey, `GNUPGHOME=$PWD/g gpg --gen-revoke dev@example.com`), gpgKill)),
		waits("ssh-keygen-change-passphrase", "ssh-keygen", "password", `ssh-keygen -q -t ed25519 -N '' -f k`, `ssh-keygen -p -f k`),
	}),
	family("disk", []scenario{
		waits("cryptsetup-open-test", "cryptsetup", "password", luksImage, `cryptsetup open --test-passphrase luks.img`),
		waits("mlabel-new", "mlabel", "text", fatImage, `mlabel -i fat.img ::`),
	}),
)
