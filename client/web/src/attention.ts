/**
 * Background-tab attention: while the tab is hidden and prompts wait, the title says how
 * many, and (if the person allowed it) a notification appears; clicking it opens the session.
 */
const BASE_TITLE = 'Tether';
let notified = new Set<string>();

export function attention(sessionId: string, pending: { requestId: string; toolName: string }[]): void {
  if (!document.hidden || pending.length === 0) {
    if (document.title !== BASE_TITLE) document.title = BASE_TITLE; // called on every frame: write only a change
    if (!pending.length) notified = new Set();
    return;
  }
  document.title = `(${pending.length}) waiting for you · ${BASE_TITLE}`;
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return;
  for (const p of pending) {
    if (notified.has(p.requestId)) continue;
    notified.add(p.requestId);
    const n = new Notification('Tether: permission needed', { body: `${p.toolName} is waiting for an answer`, tag: p.requestId });
    n.onclick = () => {
      window.focus();
      location.hash = `#session=${sessionId}`;
      n.close();
    };
  }
}

/** Asks the person whether the page may show notifications. */
export function askNotifications(): Promise<NotificationPermission> {
  return typeof Notification === 'undefined' ? Promise.resolve('denied') : Notification.requestPermission();
}
