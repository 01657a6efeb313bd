package controllers

import (
	"fmt"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/notes"
)

// pullRequestDescription is the title and body of the pull request for
// the pushed commit head: the commit's subject; the run's changes, file by
// file, when this run pushed it; the policy moves of all the automation's
// commits on the push branch that the base branch does not have, as their
// trailers state them; the holds and refused downgrades of the run.
func pullRequestDescription(run *automationRun, head string) (string, forge.Description, error) {
	auto := run.auto
	desc := forge.Description{Automation: run.front.kind + " " + auto.Namespace + "/" + auto.Name, Head: head}
	history := run.session.History(gitrepo.HistoryOptions{})
	message, found, err := history.Message(head)
	if err != nil {
		return "", desc, fmt.Errorf("reading the pushed commit: %w", err)
	}
	title, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	if !found || title == "" {
		title = "Update images (uprev " + desc.Automation + ")"
	}
	if head == run.commit {
		for _, c := range run.result.Changes {
			desc.Changes = append(desc.Changes, forge.Change{File: c.File, Policy: c.Policy.String(), Old: c.OldValue, New: c.NewValue})
		}
		desc.CRDs = run.crdLines
	}
	messages, err := pullRequestMessages(history, auto)
	if err != nil {
		return "", desc, err
	}
	if len(messages) == 0 && found {
		messages = []string{message}
	}
	var moves []forge.Update
	for i := len(messages) - 1; i >= 0; i-- {
		trailers := guard.ParseUpdateTrailers(messages[i])
		if len(trailers) > 0 {
			desc.Commits++
		}
		for _, u := range trailers {
			moves = append(moves, forge.Update{Policy: u.Policy, Old: u.Old, New: u.New})
		}
	}
	desc.Updates = forge.FoldUpdates(moves)
	if run.rules != nil {
		if desc.Held, err = heldVersions(run.rules.Held(), history); err != nil {
			return "", desc, err
		}
	}
	for _, d := range refusedDowngrades(auto.Status.RefusedDowngrades, run) {
		desc.RefusedDowngrades = append(desc.RefusedDowngrades, forge.RefusedDowngrade{Policy: d.Policy, File: d.File, Current: d.Current, Selected: d.Selected})
	}
	return title, desc, nil
}

// heldVersions are the holds as the body lists them: a rejection with who
// made its commit and its reason, both written by whoever made the commit
// and so made inert (notes.CodeSpan): they mention nobody, close no block
// and, on one line after uprev's words, pass for none of uprev's lines.
func heldVersions(holds []guard.Hold, history *gitrepo.History) ([]forge.Held, error) {
	out := make([]forge.Held, 0, len(holds))
	for _, h := range holds {
		held := forge.Held{Policy: h.Policy, Version: h.Version, RevertedIn: h.RevertedIn}
		if h.Reason != "" {
			author, found, err := history.Author(h.RevertedIn)
			if err != nil {
				return nil, fmt.Errorf("reading the rejection of %s %s: %w", h.Policy, h.Version, err)
			}
			if !found {
				author = "unknown"
			}
			held.RejectedBy, held.Reason = notes.CodeSpan(author), notes.CodeSpan(h.Reason)
		}
		out = append(out, held)
	}
	return out, nil
}

// pullRequestMessages are the messages of the push branch's commits that
// the base branch does not have, newest first: the pull request's commits.
// The base is read as fetched; a base branch the run does not fetch
// counts as the checkout branch.
func pullRequestMessages(history *gitrepo.History, auto *uprevv1.UpdateAutomation) ([]string, error) {
	inBase := map[string]bool{}
	mark := func(sha, _ string) bool {
		inBase[sha] = true
		return true
	}
	found, err := history.Walk(pullRequestBase(auto), mark)
	if err == nil && !found {
		_, err = history.Walk(auto.Spec.Git.Ref.Branch, mark)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the base branch: %w", err)
	}
	var messages []string
	_, err = history.Walk(auto.PushBranch(), func(sha, message string) bool {
		if !inBase[sha] {
			messages = append(messages, message)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("reading the push branch: %w", err)
	}
	return messages, nil
}
