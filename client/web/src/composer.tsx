/**
 * The prompt box: Enter sends, Shift+Enter breaks the line; images pasted or dropped become
 * image content blocks. It stays usable while a turn runs or a permission prompt is pending:
 * the prompt is queued (Queue), or cuts into the running turn (Steer). The text lives in the
 * textarea itself (uncontrolled): a keystroke renders nothing, and the page's re-renders (a
 * streamed delta each) skip the composer.
 */
import { memo } from 'preact/compat';
import { ErrorAlert } from './error-alert';
import { useRef, useState } from 'preact/hooks';
import type { ImageAttachment, OpenSession } from './session';
import { useStoreSelect } from './store';

/** Largest image accepted (the Messages API's own limit is 5 MB per image). */
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

function readImage(file: File): Promise<ImageAttachment> {
  return new Promise((resolve, reject) => {
    if (!IMAGE_TYPES.includes(file.type))
      return reject(new Error(`${file.type || 'this file'} is not an image the model reads (PNG, JPEG, GIF, WebP)`));
    if (file.size > MAX_IMAGE_BYTES) return reject(new Error('image over 5 MB'));
    const r = new FileReader();
    r.onload = () =>
      resolve({ mediaType: file.type, data: String(r.result).replace(/^data:[^,]*,/, ''), name: file.name || 'pasted image' });
    r.onerror = () => reject(new Error('could not read the image'));
    r.readAsDataURL(file);
  });
}

export const Composer = memo(function Composer({ session }: { session: OpenSession }) {
  const box = useRef<HTMLTextAreaElement>(null);
  const [images, setImages] = useState<ImageAttachment[]>([]);
  const [error, setError] = useState<string>();
  const [sending, setSending] = useState(false);

  const addFiles = async (files: File[]) => {
    try {
      const read = await Promise.all(files.filter((f) => f.type.startsWith('image/')).map(readImage));
      setImages((cur) => [...cur, ...read]);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  // While a turn runs a prompt waits in the queue; a controller may steer instead (it cuts into the turn).
  // Only a change of "running" re-renders the composer, not every streamed delta.
  const running = useStoreSelect(session.view, (v) => v.state === 'running');
  const send = async (steer = false) => {
    const text = box.current?.value ?? '';
    if (!text.trim() && !images.length) return;
    setSending(true);
    setError(undefined);
    try {
      await session.sendPrompt(text.trim(), images, steer);
      // What was typed meanwhile stays; what was sent goes.
      if (box.current) box.current.value = box.current.value.startsWith(text) ? box.current.value.slice(text.length) : box.current.value;
      setImages([]);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setSending(false);
    }
  };
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => e.preventDefault()}
      onDrop={(e) => {
        e.preventDefault();
        void addFiles([...(e.dataTransfer?.files ?? [])]);
      }}
    >
      {images.length > 0 && (
        <ul class="attachments" aria-label="images to send">
          {images.map((im, i) => (
            <li key={i}>
              <img src={`data:${im.mediaType};base64,${im.data}`} alt={im.name} />
              <button type="button" aria-label={`Remove ${im.name}`} onClick={() => setImages(images.filter((_, j) => j !== i))}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="composer-row">
        <label class="sr-only" for="prompt">
          Message
        </label>
        <textarea
          id="prompt"
          name="prompt"
          rows={2}
          ref={box}
          placeholder="Message the agent (Enter sends, Shift+Enter for a new line; paste or drop images)"
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              void send();
            }
          }}
          onPaste={(e) => {
            const files = [...(e.clipboardData?.files ?? [])];
            if (files.length) {
              e.preventDefault();
              void addFiles(files);
            }
          }}
        />
        <button type="submit" class="primary" disabled={sending} title={running ? 'Queued: it runs when the current turn ends' : undefined}>
          Send
        </button>
        {running && (
          <button
            type="button"
            disabled={sending}
            onClick={() => void send(true)}
            title="Cut into the running turn now instead of waiting for it to end"
          >
            Steer
          </button>
        )}
      </div>
      <ErrorAlert error={error} />
    </form>
  );
});
