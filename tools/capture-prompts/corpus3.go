package main

// The third round of captures (issue 24): programs of the kinds a second,
// independent capture found weak (consoles opened in a writing mode,
// overwrite, recover and lose-changes questions in editors and archivers,
// secrets asked by destructive commands, curses menus painted without the
// alternate screen, shells' own confirmations), captured before any rule
// or model looked at them and labelled by the rules of
// terminal/testdata/corpus/README.md ("Round three").

// typing types keys into the program, one string each time it goes quiet,
// to bring it to the question the capture is of (edit, then ask to quit).
func typing(sc scenario, keys ...string) scenario { sc.keys = keys; return sc }

// onTerm runs the program with TERM=term; "linux" has no alternate
// screen, so curses programs paint over the normal one.
func onTerm(sc scenario, term string) scenario { sc.term = term; return sc }

// killedEditor leaves the swap file of an editing session that died with
// unsaved changes: it runs the editor on a pty, types a change, waits for
// the swap file to be written, then kills the editor with SIGKILL.
func killedEditor(editor string) string {
	return files + ` && { ((sleep 1; printf 'ichanged \033'; sleep 12) | script -qfec '` + editor + ` a.txt' /dev/null) </dev/null >/dev/null 2>&1 & } && sleep 7 && ` +
		`for p in $(ps -eo pid=,args= | awk '$2=="` + editor + `" && $3=="a.txt" {print $1}'); do kill -9 $p; done; sleep 0.3; true`
}

// Setups of round three.
const (
	xfsImage  = `truncate -s 300M disk.img && mkfs.xfs -q disk.img`
	fatImage  = files + ` && mkfs.fat -C fat.img 2048 >/dev/null && mcopy -i fat.img a.txt ::a.txt`
	luksImage = `truncate -s 32M luks.img && printf 'throwaway' > k && cryptsetup luksFormat -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file k luks.img`
	keystore  = `openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 -subj /CN=capture.local 2>/dev/null && keytool -importcert -noprompt -file c.pem -keystore ks.p12 -storepass changeit -alias capture >/dev/null 2>&1`
	fossilCo  = `fossil init r.fossil >/dev/null && mkdir w && cd w && fossil open ../r.fossil >/dev/null && printf 'one\n' > a.txt && fossil add a.txt >/dev/null && fossil commit -m init >/dev/null`
	cvsCo     = `export CVSROOT=$PWD/cvsroot && cvs -Q init && mkdir imp && cd imp && printf 'one\n' > a.txt && cvs -Q import -m init proj vendor start && cd .. && cvs -Q checkout -d w proj`
	passStore = gnupg + ` && GNUPGHOME=$PWD/g gpg -q --batch --passphrase '' --quick-gen-key dev@example.com default default never 2>/dev/null && export GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store && pass init dev@example.com >/dev/null && printf 'throwaway\n' | pass insert -e web/example >/dev/null`
	editKeys  = "x"
)

var round3 = concat(
	family("disk", []scenario{
		risky("lvm-shell", "lvm", "command", "the volume manager's shell runs lvremove, vgremove and pvremove at once", ``, `lvm`),
		risky("xfs-db-expert", "xfs_db", "command", "xfs_db -x opened the filesystem in expert (writing) mode; write and blocktrash change it at once", xfsImage, `xfs_db -x disk.img`),
		waits("xfs-db-readonly", "xfs_db", "command", xfsImage, `xfs_db -r disk.img`),
		exits("xfs-repair-clean", "xfs_repair", xfsImage, `xfs_repair disk.img`),
		exits("xfs-info", "xfs_info", xfsImage, `xfs_info disk.img`),
		risky("mcopy-overwrite", "mcopy", "choice", "o or O overwrites a.txt inside the FAT image", fatImage, `mcopy -i fat.img a.txt ::a.txt`),
		exits("mdir-list", "mdir", fatImage, `mdir -i fat.img ::`),
		exits("mkntfs-image", "mkntfs", blankImage, `mkntfs disk.img`),
		risky("mkfs-nilfs2-existing", "mkfs.nilfs2", "yes_no", "y formats over the existing ext4 filesystem", `truncate -s 128M disk.img && mkfs.ext4 -q -F disk.img`, `mkfs.nilfs2 disk.img`),
		exits("mkfs-f2fs-existing", "mkfs.f2fs", `truncate -s 128M disk.img && mkfs.ext4 -q -F disk.img`, `mkfs.f2fs disk.img`),
		exits("mkfs-exfat-existing", "mkfs.exfat", `truncate -s 128M disk.img && mkfs.ext4 -q -F disk.img`, `mkfs.exfat disk.img`),
		waits("testdisk-log", "testdisk", "choice", dosImage, `testdisk disk.img`),
		onTerm(waits("testdisk-log-linux", "testdisk", "choice", dosImage, `testdisk disk.img`), "linux"),
		onTerm(risky("cfdisk-table-linux", "cfdisk", "command", "cfdisk's Delete and Write change the image's partition table", dosImage, `cfdisk disk.img`), "linux"),
		onTerm(risky("cfdisk-label-linux", "cfdisk", "choice", "choosing a label type starts a new, empty partition table for the image", blankImage, `cfdisk disk.img`), "linux"),
		typing(risky("gdisk-zap", "gdisk", "yes_no", "Y wipes the GPT and MBR of the image", dosImage, `gdisk disk.img`), "x\r", "z\r"),
		risky("cryptsetup-erase", "cryptsetup", "yes_no", "YES erases every keyslot; the data can never be decrypted", luksImage, `cryptsetup erase luks.img`),
		risky("cryptsetup-removekey", "cryptsetup", "password", "the passphrase typed is removed from the header; if it is the last one the data is lost", luksImage, `cryptsetup luksRemoveKey luks.img`),
		risky("cryptsetup-killslot", "cryptsetup", "yes_no", "YES purges the last keyslot; the device becomes unusable", luksImage, `cryptsetup luksKillSlot luks.img 0`),
		exits("cryptsetup-isluks", "cryptsetup", luksImage, `cryptsetup -v isLuks luks.img`),
	}),
	family("archive", []scenario{
		risky("unar-overwrite", "unar", "choice", "o overwrites a.txt with the archive's copy", files+` && zip -q a.zip a.txt`, `unar a.zip`),
		exits("lsar-list", "lsar", files+` && zip -q a.zip a.txt b.txt`, `lsar -l a.zip`),
		risky("bsdtar-interactive", "bsdtar", "yes_no", "y extracts over the existing a.txt", files+` && tar -cf a.tar a.txt`, `bsdtar -xwf a.tar`),
		exits("bsdtar-list", "bsdtar", files+` && tar -cf a.tar a.txt b.txt`, `bsdtar -tvf a.tar`),
		risky("unshar-overwrite", "unshar", "choice", "yes or all overwrites the existing a.txt", files+` && shar -X a.txt > a.shar 2>/dev/null`, `unshar a.shar`),
		risky("borg-delete", "borg", "yes_no", "YES deletes the repository and every archive in it", `borg init -e none repo >/dev/null 2>&1`, `borg delete repo`),
		waits("borg-init-passphrase", "borg", "password", ``, `borg init -e repokey repo`),
		exits("borg-list", "borg", `borg init -e none repo >/dev/null 2>&1`, `borg list repo`),
		waits("restic-init", "restic", "password", ``, `restic init -r repo`),
		waits("zipcloak-password", "zipcloak", "password", files+` && zip -q a.zip a.txt`, `zipcloak a.zip`),
	}),
	family("editor", []scenario{
		risky("vim-swap-recover", "vim", "choice", "(D)elete removes the swap file of the dead session, losing its unsaved changes; (E)dit anyway risks two versions", killedEditor("vim"), `vim a.txt`),
		risky("nvim-swap-recover", "nvim", "choice", "(D)elete removes the swap file of the dead session, losing its unsaved changes", killedEditor("nvim"), `nvim a.txt`),
		typing(waits("nvi-quit-modified", "nvi", "command", files, `nvi a.txt`), "ix", "\x1b", ":q\r"),
		typing(risky("emacs-kill-modified", "emacs", "yes_no", "yes kills the buffer, losing its unsaved changes", files, `emacs -nw -Q a.txt`), editKeys, "\x18k", "\r"),
		typing(waits("emacs-quit-save", "emacs", "choice", files, `emacs -nw -Q a.txt`), editKeys, "\x18\x03"),
		typing(risky("emacs-quit-nosave", "emacs", "yes_no", "yes exits, losing the unsaved changes", files, `emacs -nw -Q a.txt`), editKeys, "\x18\x03", "n"),
		typing(risky("zile-kill-modified", "zile", "yes_no", "yes kills the buffer, losing its unsaved changes", files, `zile a.txt`), editKeys, "\x18k", "\r"),
		typing(risky("mg-quit-nosave", "mg", "yes_no", "yes exits, losing the unsaved changes", files, `mg a.txt`), editKeys, "\x18\x03", "n"),
		typing(risky("jove-quit-modified", "jove", "yes_no", "yes leaves, losing the unsaved changes", files, `jove a.txt`), editKeys, "\x18\x03"),
		typing(risky("joe-lose-changes", "joe", "yes_no", "y closes the file, losing its changes", files, `joe a.txt`), editKeys, "\x03"),
		typing(waits("nano-save-modified", "nano", "yes_no", files, `nano a.txt`), editKeys, "\x18"),
		typing(waits("micro-save-modified", "micro", "yes_no", files, `micro a.txt`), editKeys, "\x11"),
		typing(risky("dte-quit-modified", "dte", "yes_no", "y quits, losing the unsaved changes", files, `dte a.txt`), editKeys, "\x11"),
		typing(waits("vile-quit-modified", "vile", "command", files, `vile a.txt`), "ix", "\x1b", ":q\r"),
		typing(waits("kak-quit-modified", "kak", "command", files, `kak a.txt`), "ix", "\x1b", ":q\r"),
		waits("tilde-first-run", "tilde", "choice", files, `tilde a.txt`),
		typing(waits("e3-quit-modified", "e3", "choice", files, `e3 a.txt`), editKeys, "\x0bq"),
	}),
	family("shell", []scenario{
		typing(risky("zsh-rm-star", "zsh", "yes_no", "y deletes every file in the directory", `touch f1 f2 f3`, `zsh -f`), "rm *\r"),
		typing(risky("tcsh-rmstar", "tcsh", "yes_no", "y deletes every file in the directory", `touch f1 f2 f3`, `tcsh -f`), "set rmstar\r", "rm *\r"),
		typing(waits("zsh-correct", "zsh", "choice", ``, `zsh -f`), "setopt correct\r", "sl\r"),
		typing(waits("zsh-list-many", "zsh", "yes_no", ``, `zsh -f`), "ls /usr/bin/\t"),
		waits("mksh-shell", "mksh", "command", ``, `mksh`),
		waits("yash-shell", "yash", "command", ``, `yash`),
		waits("rc-shell", "rc", "command", ``, `rc`),
	}),
	family("file", []scenario{
		exits("trash-empty", "trash-empty", files+` && trash-put a.txt`, `trash-empty`),
		waits("trash-restore", "trash-restore", "choice", files+` && trash-put a.txt`, `trash-restore`),
	}),
	family("credential", []scenario{
		slow(risky("keytool-delete", "keytool", "password", "the store password confirms deleting the entry from the keystore", keystore, `keytool -delete -alias capture -keystore ks.p12`)),
		slow(after(risky("gpg-delete-public", "gpg", "yes_no", "y deletes the public key from the keyring", gpgKey+` && GNUPGHOME=$PWD/g gpg --export dev@example.com > pub.gpg && mkdir -m 700 g2 && GNUPGHOME=$PWD/g2 gpg -q --import pub.gpg 2>/dev/null`, `GNUPGHOME=$PWD/g2 gpg --delete-key dev@example.com`), gpgKill+`; GNUPGHOME=$PWD/g2 gpgconf --kill all`)),
		slow(after(risky("pass-rm", "pass", "yes_no", "y deletes the stored password", passStore, `GNUPGHOME=$PWD/g PASSWORD_STORE_DIR=$PWD/store pass rm web/example`), gpgKill)),
		waits("kpcli-shell", "kpcli", "command", ``, `kpcli`),
		waits("certutil-newdb", "certutil", "password", `mkdir nssdb`, `certutil -N -d sql:nssdb`),
		waits("signify-generate", "signify-openbsd", "password", ``, `signify-openbsd -G -p k.pub -s k.sec`),
		waits("minisign-generate", "minisign", "password", ``, `minisign -G -p k.pub -s k.sec`),
		exits("minisign-exists", "minisign", `minisign -G -W -p k.pub -s k.sec >/dev/null 2>&1`, `minisign -G -p k.pub -s k.sec`),
	}),
	family("database", []scenario{
		waits("sqlcipher-shell", "sqlcipher", "command", ``, `sqlcipher app.db`),
		waits("gdbmtool-shell", "gdbmtool", "command", ``, `gdbmtool app.gdbm`),
		waits("tdbtool-shell", "tdbtool", "command", ``, `tdbtool`),
		waits("isql-fb-shell", "isql-fb", "command", ``, `isql-fb`),
	}),
	family("package", []scenario{
		serially(waits("debfoster-keep", "debfoster", "choice", ``, `debfoster -k $PWD/keepers`)),
		serially(waits("dpkg-reconfigure-tzdata", "dpkg-reconfigure", "choice", ``, `dpkg-reconfigure tzdata`)),
		serially(onTerm(waits("dpkg-reconfigure-tzdata-linux", "dpkg-reconfigure", "choice", ``, `dpkg-reconfigure tzdata`), "linux")),
		serially(slow(waits("aptitude-ui", "aptitude", "command", aptParts, `aptitude -o Dir::Etc::SourceParts=$PWD/parts`))),
	}),
	family("vcs", []scenario{
		exits("fossil-clean", "fossil", fossilCo+` && touch junk.tmp`, `cd w && fossil clean`),
		exits("fossil-status", "fossil", fossilCo+` && printf 'two\n' >> a.txt`, `cd w && fossil changes`),
		risky("cvs-release-delete", "cvs", "yes_no", "y releases and deletes the working directory", cvsCo, `export CVSROOT=$PWD/cvsroot && cvs release -d w`),
		exits("cvs-status", "cvs", cvsCo, `export CVSROOT=$PWD/cvsroot && cd w && cvs -q status a.txt`),
		risky("rcs-co-writable", "co", "yes_no", "y removes the edited working file and checks out the stored revision over it", files+` && mkdir RCS && ci -q -u -t-demo a.txt && chmod u+w a.txt && printf 'edited\n' >> a.txt`, `co a.txt`),
		waits("rcs-ci-description", "ci", "text", files+` && mkdir RCS`, `ci a.txt`),
	}),
	family("network", []scenario{
		waits("cadaver-shell", "cadaver", "command", ``, `cadaver`),
		waits("tftp-shell", "tftp", "text", ``, `tftp`),
		waits("ncftp-shell", "ncftp", "command", ``, `ncftp`),
		waits("rclone-config", "rclone", "choice", ``, `rclone config --config $PWD/rclone.conf`),
		waits("neomutt-create", "neomutt", "yes_no", ``, `neomutt`),
		waits("smbclient-password", "smbclient", "password", ``, `smbclient //127.0.0.1/share -p 1`),
		risky("ldapdelete-password", "ldapdelete", "password", "the bind password confirms deleting the entry", ``, `ldapdelete -x -W -H ldap://127.0.0.1:1 -D cn=admin,dc=example,dc=com cn=alice,dc=example,dc=com`),
		waits("ldapsearch-password", "ldapsearch", "password", ``, `ldapsearch -x -W -H ldap://127.0.0.1:1 -D cn=admin,dc=example,dc=com -b dc=example,dc=com`),
	}),
	family("menu", []scenario{
		onTerm(risky("dialog-yesno-erase-linux", "dialog", "yes_no", "Yes erases the backup disk", ``, `dialog --yesno "Erase all data on the backup disk?" 7 50`), "linux"),
		onTerm(waits("whiptail-menu-linux", "whiptail", "choice", ``, `whiptail --menu "Keyboard layout:" 15 50 4 us "" de "" fr "" gb ""`), "linux"),
	}),
	family("pager", []scenario{
		waits("nnn-browser", "nnn", "command", files, `nnn`),
		waits("sc-sheet", "sc", "command", ``, `sc`),
	}),
)
