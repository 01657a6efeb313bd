package gitrepo

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// RecordOptions says how CommitRecord makes its commit.
type RecordOptions struct {
	// Sign signs the commit (`git commit -S`) whatever commit.gpgSign
	// says, with the key and format the Git configuration names
	// (user.signingKey, gpg.format); git's error when there is none.
	Sign bool
	// Now is the commit's author and committer time.
	Now time.Time
}

// CommitRecord makes a commit with message and no change of files on the
// branch HEAD of the checkout holding dir is on, with the user's own git
// (`git commit --allow-empty --only`), so that everything the user's Git
// configuration asks of a commit applies: the author and committer it
// names (never guessed: user.useConfigOnly), signing (commit.gpgSign,
// user.signingKey, gpg.format; opts.Sign), and the repository's hooks. It
// returns the commit's SHA and the branch. The index and working tree are
// left as they were: what is staged stays staged, and is not committed. A
// detached HEAD is an error, and so is anything git refuses (no identity,
// a key that cannot sign, a hook that fails), with what git said.
func CommitRecord(dir, message string, opts RecordOptions) (sha, branch string, err error) {
	if _, err := runGit(dir, nil, "", "rev-parse", "--git-dir"); err != nil {
		if strings.Contains(err.Error(), "not a git repository") {
			return "", "", fmt.Errorf("%s: %w", dir, ErrNotRepository)
		}
		return "", "", err
	}
	branch, err = runGit(dir, nil, "", "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return "", "", fmt.Errorf("%s: HEAD is detached; check out the branch to record the commit on", dir)
	}
	date := fmt.Sprintf("%d %s", opts.Now.Unix(), opts.Now.Format("-0700"))
	env := []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}
	args := []string{"-c", "user.useConfigOnly=true", "commit", "--quiet", "--allow-empty", "--only", "--cleanup=verbatim", "--file=-"}
	if opts.Sign {
		args = append(args, "--gpg-sign")
	}
	if _, err := runGit(dir, env, message, args...); err != nil {
		return "", "", err
	}
	sha, err = runGit(dir, nil, "", "rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	return sha, branch, nil
}

// runGit runs the user's git in dir with input on its standard input and
// env added to the environment, and returns its trimmed output; its error
// says what git said.
func runGit(dir string, env []string, input string, args ...string) (string, error) {
	path, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("the commit is made with git, which is not installed: %w", err)
	}
	cmd := exec.Command(path, args...) // #nosec G204 -- git, with arguments of this function's callers
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(input)
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		said := strings.TrimSpace(stderr.String())
		if said == "" {
			said = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", subcommand(args), said)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// subcommand is the git command args run, after the options of git itself.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return ""
}
