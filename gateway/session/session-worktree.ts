import type { WorktreeInfo } from '../../core/protocol/worktree.js';
import type { SessionAudit } from './session-audit.js';

/**
 * A session's git worktree as its agent reported it (the `worktree` event, core/protocol/worktree.ts):
 * kept for session info (a dirty one stays listed after the end) and written to the audit trail:
 * who created it (the session's owner, whose create asked for it) and how it ended (removed or kept).
 */
export class SessionWorktree {
  private info: WorktreeInfo | undefined;

  constructor(
    private readonly audit: SessionAudit,
    private readonly who: () => { owner: string; agent: string },
  ) {}

  /** What session info shows; undefined for a session without a worktree. */
  get current(): WorktreeInfo | undefined {
    return this.info;
  }

  /** The agent's report, as it arrives (once when created, once at the end): audited, then kept. */
  reported(wt: WorktreeInfo): void {
    const { owner, agent } = this.who();
    const where = { agent, path: wt.path, branch: wt.branch, base: wt.base };
    if (wt.state === 'active') this.audit.quietly(owner, 'worktree_create', where);
    else this.audit.quietly('tether', 'worktree_end', { ...where, state: wt.state, ...(wt.reason ? { reason: wt.reason } : {}) });
    this.info = wt;
  }

  /** A restarted gateway reads the report back from the history (audited when it first arrived). */
  restore(wt: WorktreeInfo): void {
    this.info = wt;
  }
}
