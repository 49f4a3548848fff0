#!/usr/bin/env bash
# The steps that torchgate's workflows share (.github/workflows/torchgate.yml on the hosted CPU
# runner, torchgate-gpu.yml on the GPU box), so that every machine does the same thing:
#
#   bash .github/torchgate.sh comment-body       this machine's pull-request comment, written
#                                                to comment/comment.md
#   bash .github/torchgate.sh commit-baseline    commit reports/$TORCHGATE_MACHINE/, and
#                                                nothing else, to the branch checked out
#
# Both read TORCHGATE_MACHINE, the name of the machine that measured; its reports are
# reports/$TORCHGATE_MACHINE/.
set -euo pipefail

die() {
  echo "torchgate: $*" >&2
  exit 1
}

: "${TORCHGATE_MACHINE:?set TORCHGATE_MACHINE, the name of the machine that measured}"
REPORTS="reports/$TORCHGATE_MACHINE"

# The comment: this machine's summary and the committed parameters the pull request changes
# (`dvc params diff` between two commits: the composition this run measured with is not one of
# them). When measuring failed, it says so, with the last lines of the log, so that a red
# check never keeps an earlier run's comment. No `dvc metrics diff`: against numbers measured
# at another time it can contradict the lock-step verdicts that the summary gives.
# Reads BASE (the base commit), MEASURED (the outcome of the step that measured: success,
# failure, skipped) and LOG (what the steps up to it printed). The body also goes to
# $GITHUB_STEP_SUMMARY, the run's page, when that is set.
comment_body() {
  mkdir -p comment
  if [ "${MEASURED:-}" = success ] && [ -f "$REPORTS/summary.md" ]; then
    if params=$(dvc params diff "$BASE" HEAD --md 2>&1); then    # no change: a bare header
      [ "$(printf '%s\n' "$params" | grep -c '^|')" -gt 2 ] ||
        params="None: params.yaml is as at the base commit."
    else
      params="dvc params diff failed: $params"
    fi
    {
      echo "Measured on \`$TORCHGATE_MACHINE\`, against the base commit ${BASE:0:10}."
      echo
      cat "$REPORTS/summary.md"
      echo
      echo "## Parameters this pull request changes"
      echo
      echo "$params"
    } > comment/comment.md
  else
    {
      echo "# torchgate on \`$TORCHGATE_MACHINE\`: measurement failed"
      echo
      echo "Nothing was compared: the check stopped before its reports were written (the"
      echo "measuring step's outcome: ${MEASURED:-unknown}). The last lines of its log:"
      echo
      echo '````text'
      tail -n 40 "${LOG:-}" 2>/dev/null || echo "(no log at ${LOG:-LOG unset})"
      echo '````'
    } > comment/comment.md
  fi
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat comment/comment.md >> "$GITHUB_STEP_SUMMARY"
  fi
  echo "torchgate: wrote comment/comment.md ($(wc -l < comment/comment.md) lines)"
}

# One commit on the branch checked out that holds reports/$TORCHGATE_MACHINE/ as measured and
# changes nothing else (this run's composed params.yaml and dvc.lock stay out of it), marked
# [skip ci], pushed to origin. When the branch moved meanwhile (the other machine's writer, a
# merge), the commit is made again on its new tip and pushed again: a rebase of a commit that
# replaces one folder, which machines never share, so it cannot conflict. The work tree, HEAD
# and the index are left as they are (the gate runs after this on the same composition).
commit_baseline() {
  local branch measured message index parent tree commit attempt
  branch=$(git symbolic-ref -q --short HEAD) ||
    die "HEAD is not a branch: check out the branch to commit the reports to"
  [ -d "$REPORTS" ] || die "no $REPORTS: nothing was measured"
  measured=$(git rev-parse HEAD)
  message="torchgate baseline: $TORCHGATE_MACHINE at ${measured:0:12} [skip ci]"
  index="$(mktemp -d)/index"
  parent=$measured
  for attempt in 1 2 3 4 5; do
    GIT_INDEX_FILE=$index git read-tree "$parent"
    GIT_INDEX_FILE=$index git add -A -- "$REPORTS"
    tree=$(GIT_INDEX_FILE=$index git write-tree)
    if [ "$tree" = "$(git rev-parse "$parent^{tree}")" ]; then
      echo "torchgate: $REPORTS is unchanged on $branch; nothing to commit"
      return 0
    fi
    commit=$(git -c user.name="${GIT_USER_NAME:-github-actions[bot]}" \
      -c user.email="${GIT_USER_EMAIL:-41898282+github-actions[bot]@users.noreply.github.com}" \
      commit-tree "$tree" -p "$parent" -m "$message" \
      -m "The reports of $TORCHGATE_MACHINE, measured at $measured: its next baseline.")
    if git push -q origin "$commit:refs/heads/$branch"; then
      echo "torchgate: pushed $REPORTS to $branch as ${commit:0:12}"
      return 0
    fi
    echo "torchgate: $branch moved (try $attempt of 5): committing again on its new tip"
    sleep $(((attempt - 1) * 5))
    git fetch -q origin "refs/heads/$branch"
    parent=$(git rev-parse FETCH_HEAD)
  done
  die "could not push $REPORTS to $branch in 5 tries"
}

case "${1:-}" in
  comment-body) comment_body ;;
  commit-baseline) commit_baseline ;;
  *) die "usage: bash .github/torchgate.sh comment-body|commit-baseline" ;;
esac
