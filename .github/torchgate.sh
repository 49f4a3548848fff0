#!/usr/bin/env bash
# The steps that torchgate's workflows share (.github/workflows/torchgate.yml on the hosted CPU
# runner, torchgate-gpu.yml on the GPU box), so that every machine does the same thing:
#
#   bash .github/torchgate.sh comment-body       this machine's pull-request comment, written
#                                                to comment/comment.md
#   bash .github/torchgate.sh commit-baseline    commit reports/$TORCHGATE_MACHINE/, and
#                                                nothing else, to the machine's baseline branch
#   bash .github/torchgate.sh previous-point     the commit the writer compares main with
#   bash .github/torchgate.sh baseline-of REV    the baseline of a pull request based on REV
#   bash .github/torchgate.sh base               BASE and BASELINE of a pull request's merge
#   bash .github/torchgate.sh publish-pictures DIR PR
#                                                a pull request's pictures (DIR: its reports
#                                                artifact) on a pages branch; IMAGES_URL
#
# All read TORCHGATE_MACHINE, the name of the machine that measured; its reports are
# reports/$TORCHGATE_MACHINE/.
#
# The baseline history is a branch per machine, torchgate/$TORCHGATE_MACHINE, never main: a
# protected main takes no push from a workflow's token (the built-in token cannot be a
# ruleset's bypass actor). Each of its commits is main's tree at the commit it measured (its
# first parent) with that machine's reports, and its second parent the machine's previous
# point: `git log torchgate/<machine> -- reports/<machine>/` is the history, and a commit of
# it is a baseline.rev whose workload code is the code its reports measured.
set -euo pipefail

die() {
  echo "torchgate: $*" >&2
  exit 1
}

: "${TORCHGATE_MACHINE:?set TORCHGATE_MACHINE, the name of the machine that measured}"
REPORTS="reports/$TORCHGATE_MACHINE"
BRANCH="torchgate/$TORCHGATE_MACHINE"
TIP="refs/remotes/origin/$BRANCH"     # a checkout with fetch-depth 0 has every branch
PAGES="torchgate-pages/$TORCHGATE_MACHINE"
PNG=89504e470d0a1a0a               # the signature every PNG file starts with, in hex

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
      echo "Measured on \`$TORCHGATE_MACHINE\`, against the base commit ${BASE:0:10}$(
        [ "${BASELINE:-$BASE}" = "$BASE" ] || echo " (its baseline: ${BASELINE:0:10} on $BRANCH)")."
      if git rev-parse -q --verify "refs/remotes/origin/$PAGES^{commit}" >/dev/null; then
        echo "Main's newest pages on this machine, with their pictures: [$PAGES]($(
          repo_url)/blob/$PAGES/$REPORTS/summary.md)."
      fi
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
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then      # its links to the run, whose artifact
    absolute_links "$(run_url)" < comment/comment.md >> "$GITHUB_STEP_SUMMARY"   # has them
  fi
  echo "torchgate: wrote comment/comment.md ($(wc -l < comment/comment.md) lines)"
}

repo_url() {
  echo "${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY:-}"
}

run_url() {
  echo "$(repo_url)/actions/runs/${GITHUB_RUN_ID:-}"
}

# Markdown on stdin with its links relative to the reports folder made absolute (URL: with
# {path}, each link's; else one page for all; IMAGES: the pictures', with {path}), as the
# comment's are (stages/comment.py).
absolute_links() {
  python -c 'import sys; from torchgate.comment import with_reports_at as at
sys.stdout.write(at(sys.stdin.read(), *sys.argv[1:]))' "$@"
}

# The raw URL of a commit's pictures, with {path}: GitHub shows a blob URL's picture as a page.
images_at() {
  echo "$(repo_url)/raw/$1/$REPORTS/{path}"
}

# A commit without parents whose tree is the files of DIR (listed NUL-separated on stdin,
# relative to DIR) under $REPORTS/, force-pushed to BRANCH, replacing what it held; prints it.
# Built in an index of its own: the work tree, HEAD and the index are left as they are.
publish() {
  local dir=$1 branch=$2 index path blob tree commit
  index="$(mktemp -d)/index"
  while IFS= read -r -d '' path; do
    blob=$(git hash-object -w -- "$dir/$path")
    GIT_INDEX_FILE=$index git update-index --add --cacheinfo "100644,$blob,$REPORTS/$path"
  done
  [ -f "$index" ] || return 1
  tree=$(GIT_INDEX_FILE=$index git write-tree)
  commit=$(git -c user.name="${GIT_USER_NAME:-github-actions[bot]}" \
    -c user.email="${GIT_USER_EMAIL:-41898282+github-actions[bot]@users.noreply.github.com}" \
    commit-tree "$tree" -m "torchgate pages: $TORCHGATE_MACHINE [skip ci]")
  git push -q -f origin "$commit:refs/heads/$branch" >&2 || return 1
  echo "$commit"
}

# The writer's pages: this machine's reports as measured, pictures included (they ignore
# themselves), on $PAGES. Prints the commit; a push refused is said, not fatal: the reports'
# own commit is what the next run needs.
publish_pages() {
  (cd "$REPORTS" && find . -type f ! -name '*.tmp' -printf '%P\0' | sort -z) |
    publish "$REPORTS" "$PAGES" ||
    echo "torchgate: could not push the pages to $PAGES (let Actions push torchgate-pages/*):" \
      "the run's page links its pictures to nothing" >&2
}

# A pull request's pictures, from DIR (its reports artifact, the pull request's own output,
# so taken as data: PNG files under pictures/ alone, each checked by its signature), on
# torchgate-pages/pull-PR/$TORCHGATE_MACHINE; prints IMAGES_URL=… for $GITHUB_ENV, or nothing
# when there is none or the push is refused (the comment then links its pictures to the run).
publish_pictures() {
  local dir=${1:?usage: publish-pictures DIR PR} pr=${2:?usage: publish-pictures DIR PR} commit
  [[ $pr =~ ^[0-9]+$ ]] || die "publish-pictures: PR must be a pull request's number, got '$pr'"
  [ -d "$dir/pictures" ] || { echo "torchgate: no pictures in $dir" >&2; return 0; }
  if commit=$( (cd "$dir" && find pictures -type f -name '*.png' -print0 | sort -z |
    while IFS= read -r -d '' path; do
      if [[ $path =~ ^pictures/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+\.png$ ]] &&
        [ "$(head -c 8 -- "$path" | od -An -tx1 | tr -d ' \n')" = "$PNG" ]; then
        printf '%s\0' "$path"
      fi
    done) | publish "$dir" "torchgate-pages/pull-$pr/$TORCHGATE_MACHINE"); then
    echo "IMAGES_URL=$(images_at "$commit")"
  else
    echo "torchgate: the pictures stay in the run's artifact (no picture, or the push to" \
      "torchgate-pages/pull-$pr/$TORCHGATE_MACHINE was refused)" >&2
  fi
}

# The writer's previous point: the machine's newest baseline, else (no branch yet) the last
# commit of the one checked out that changed its reports (main's own, if it holds any), else
# HEAD: a first run.
previous_point() {
  git rev-parse -q --verify "$TIP^{commit}" ||
    git log -1 --format=%H -- "$REPORTS" | grep . || git rev-parse HEAD
}

# A pull request's baseline: the newest baseline of this machine that measured an ancestor of
# REV (the merge's base), walked back along the second parents; else REV itself (main's own
# reports, or none: a first run).
baseline_of() {
  local rev=${1:?usage: baseline-of REV} commit
  commit=$(git rev-parse -q --verify "$TIP^{commit}") || commit=""
  while [ -n "$commit" ]; do
    if git merge-base --is-ancestor "$commit^1" "$rev"; then
      echo "$commit"
      return 0
    fi
    commit=$(git rev-parse -q --verify "$commit^2") || commit=""
  done
  git rev-parse "$rev^{commit}"
}

# A pull request's check, checked out at GitHub's test merge: BASE, the merge's first parent
# (the base branch as merged, whatever branch that is; the event's base.sha may be older or
# newer), and BASELINE, its baseline; as lines for $GITHUB_ENV.
base() {
  local first
  first=$(git rev-parse HEAD^1) || die "HEAD has no parent: check out the pull request's merge"
  echo "BASE=$first"
  echo "BASELINE=$(baseline_of "$first")"
}

# The run's page: the summary, its links to the commit that holds its reports (COMMIT), its
# pictures from the pages' commit (PAGES, when they were published).
step_summary() {
  local pages=${2:-}
  [ -n "${GITHUB_STEP_SUMMARY:-}" ] || return 0
  absolute_links "$(repo_url)/blob/$1/$REPORTS/{path}" ${pages:+"$(images_at "$pages")"} \
    < "$REPORTS/summary.md" >> "$GITHUB_STEP_SUMMARY"
}

# One commit on torchgate/$TORCHGATE_MACHINE: the tree of HEAD (the commit measured) with
# reports/$TORCHGATE_MACHINE/ as measured, and nothing else of the work tree (this run's
# composed params.yaml and dvc.lock stay out of it), on top of HEAD and of the branch's tip,
# marked [skip ci], pushed to origin. When the branch moved meanwhile, the commit is made again
# on its new tip. The work tree, HEAD and the index are left as they are (the gate runs after
# this on the same composition).
commit_baseline() {
  local measured message index previous tree commit attempt same
  [ -d "$REPORTS" ] || die "no $REPORTS: nothing was measured"
  measured=$(git rev-parse HEAD)
  message="torchgate baseline: $TORCHGATE_MACHINE at ${measured:0:12} [skip ci]"
  index="$(mktemp -d)/index"
  for attempt in 1 2 3 4 5; do
    previous=$(git rev-parse -q --verify "$TIP^{commit}") || previous=""
    GIT_INDEX_FILE=$index git read-tree "$measured"
    GIT_INDEX_FILE=$index git add -A -- "$REPORTS"
    tree=$(GIT_INDEX_FILE=$index git write-tree)
    same=$(git rev-parse -q --verify "${previous:-$measured}:$REPORTS") || same=""
    if [ "$(git rev-parse "$tree:$REPORTS")" = "$same" ]; then
      echo "torchgate: $REPORTS is unchanged since ${previous:-$measured}; nothing to commit"
      step_summary "${previous:-$measured}" "$(publish_pages)"
      return 0
    fi
    commit=$(git -c user.name="${GIT_USER_NAME:-github-actions[bot]}" \
      -c user.email="${GIT_USER_EMAIL:-41898282+github-actions[bot]@users.noreply.github.com}" \
      commit-tree "$tree" -p "$measured" ${previous:+-p "$previous"} -m "$message" \
      -m "The reports of $TORCHGATE_MACHINE, measured at $measured: its next baseline.")
    if git push -q origin "$commit:refs/heads/$BRANCH"; then
      git update-ref "$TIP" "$commit"
      echo "torchgate: pushed $REPORTS to $BRANCH as ${commit:0:12}"
      step_summary "$commit" "$(publish_pages)"
      return 0
    fi
    echo "torchgate: $BRANCH moved (try $attempt of 5): committing again on its new tip"
    sleep $(((attempt - 1) * 5))
    git fetch -q origin "+refs/heads/$BRANCH:$TIP"
  done
  die "could not push $REPORTS to $BRANCH in 5 tries"
}

case "${1:-}" in
  comment-body) comment_body ;;
  commit-baseline) commit_baseline ;;
  previous-point) previous_point ;;
  baseline-of) baseline_of "${2:-}" ;;
  base) base ;;
  publish-pictures) publish_pictures "${2:-}" "${3:-}" ;;
  *) die "usage: bash .github/torchgate.sh comment-body|commit-baseline|previous-point|base|baseline-of REV|publish-pictures DIR PR" ;;
esac
