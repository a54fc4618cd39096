import { render } from 'preact';
import { App } from './app';
import { registerServiceWorker } from './notify';
import { renderOncePerFrame } from './render-per-frame';

renderOncePerFrame();
render(<App />, document.getElementById('app')!);
registerServiceWorker();
